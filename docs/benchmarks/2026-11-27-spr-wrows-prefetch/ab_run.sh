# ABBA rounds: old build (PYTHONPATH=/tmp/exp/old) vs new (venv install)
for r in 1 2 3; do
  for who in old new new old; do
    if [ $who = old ]; then PYTHONPATH=/tmp/exp/old /work/main/.venv/bin/python /tmp/exp/ab_enc.py "$@" | sed "s/^/old /"; else /work/main/.venv/bin/python /tmp/exp/ab_enc.py "$@" | sed "s/^/new /"; fi
  done
done
