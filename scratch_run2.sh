python3 submit.py >/dev/null
timeout 90 python3 bench/verify_workloads.py --rounds 1 --out $OUT/verify.json 2>&1 | grep -v Warn | tail -12
timeout 100 python3 bench/profile_stages.py --tokens 128 1163 2984 3602 --sweep phases --out $OUT/phases.json 2>&1 | grep -v Warn
timeout 80 python3 bench/profile_stages.py --tokens 128 2984 --sweep single --out $OUT/single.json 2>&1 | grep -v Warn
timeout 130 python3 bench/profile_stages.py --tokens 17312 131072 --sweep gelu --out $OUT/gelu.json 2>&1 | grep -v Warn
timeout 50 python3 bench/profile_stages.py --tokens 4096 6824 --sweep small --out $OUT/small.json 2>&1 | grep -v Warn
