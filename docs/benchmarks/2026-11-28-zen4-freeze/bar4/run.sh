#!/bin/bash
# bar 4: the standard suite, Zenith only, base (f47f0a7) then head, then again
cd /tmp/bar4
W="machine gemm-sweep bert-base bert-base-memory minilm resnet50 mobilenet-v2 gpt2-decode gemma3-270m-decode train-transformer-43m train-lora"
for round in 1 2; do
  PYTHONPATH=/tmp/base-site /work/main/.venv/bin/zenith bench $W --frameworks zenith --threads 2 --iterations 10 --json base-$round.json > base-$round.log 2>&1
  /work/main/.venv/bin/zenith bench $W --frameworks zenith --threads 2 --iterations 10 --json head-$round.json > head-$round.log 2>&1
done
echo done > /tmp/bar4/done
