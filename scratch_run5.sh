timeout 150 python3 bench/profile_stages.py --tokens 2984 3602 --sweep limit --out $OUT/limit.json 2>&1 | grep -v Warn
