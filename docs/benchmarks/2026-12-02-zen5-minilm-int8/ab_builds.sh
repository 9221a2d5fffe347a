# Two builds of zenith/_C (copies of the installed .so) in alternating processes, ratio_probe.py in each:
# [PROBE=r50_probe.py] bash ab_builds.sh OLD.so NEW.so [pairs] [rounds]; the installed _C is restored to NEW at the end.
SO=$(.venv/bin/python -c "import zenith._C as c; print(c.__file__)")
for i in $(seq ${3:-4}); do
  for v in old new; do
    if [ $v = old ]; then cp "$1" "$SO"; else cp "$2" "$SO"; fi
    echo "$v $(.venv/bin/python docs/benchmarks/2026-12-02-zen5-minilm-int8/${PROBE:-ratio_probe.py} ${4:-100} 2>/dev/null | tail -1)"
  done
done
cp "$2" "$SO"
