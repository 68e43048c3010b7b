python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 bench/profile_verdict.py --device gpu --warm-compiler --top 45 > $OUT/profile.log 2>&1; grep "compiler warmed" $OUT/profile.log; tail -8 $OUT/profile.log
python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 1 > $OUT/stv_default.log 2>&1; grep -E "save [0-9]|compiles:|^warm|^cold" $OUT/stv_default.log
python3 -m pytest -q -p no:cacheprovider tests/test_warmup.py 2>&1 | tail -2
