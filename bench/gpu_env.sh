# Sourced by the GPU scripts (gpu_run.sh, gpu_mistakes.sh) from the repository root: on a
# bare GPU image, the wheels carried in .whl/ (textual, watchdog, shtab, packaging...)
# go into /tmp/site, which leads PYTHONPATH; the repository itself follows.
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site:$PWD || export PYTHONPATH=$PWD
else
    export PYTHONPATH=$PWD
fi
