STEPS="versions check mistakes" MISTAKE_DRILLS=04,05,06 MISTAKES_LIMIT=170 OUT=$OUT bash bench/gpu_run.sh >/dev/null 2>&1
cat $OUT/summary.txt | grep -v '^{' | tail -45
