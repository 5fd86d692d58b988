python3 submit.py >/dev/null
timeout 90 python3 bench/verify_workloads.py --rounds 1 --out $OUT/verify.json 2>&1 | grep -v Warn | tail -11
timeout 80 python3 bench/profile_stages.py --tokens 128 613 1163 2984 --sweep phases --out $OUT/phases.json 2>&1 | grep -v Warn
timeout 60 python3 bench/profile_stages.py --tokens 128 613 --sweep single --out $OUT/single.json 2>&1 | grep -v Warn
timeout 80 python3 bench/profile_stages.py --tokens 1163 2984 3602 4096 --sweep small --out $OUT/small.json 2>&1 | grep -v Warn
timeout 50 python3 bench/profile_stages.py --tokens 6824 17312 131072 --out $OUT/large.json 2>&1 | grep -v Warn
