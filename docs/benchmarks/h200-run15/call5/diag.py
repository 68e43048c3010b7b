# The diagnostic of call 5, as run (from the repository root, PYTHONPATH=.; module paths of that tree:
# tutor.harness.problems.problem_module was then the registry's loader).
import sys, time, uuid, tempfile, traceback
from pathlib import Path
sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import torch
from tutor.harness import cost
cost.install()
from tutor.catalog import get_drill, solution_path
from tutor.harness.loader import load_student_module
from tutor.harness.problems import problem_module
import save_to_verdict as b
for d in ["04", "06"]:
    drill = get_drill(d)
    sol = solution_path(drill).read_text()
    f = Path(tempfile.mkdtemp()) / drill.file
    f.write_text(b.content(sol, 1, True, uuid.uuid4().hex[:8]))
    module = load_student_module(f, f.read_bytes())
    problem = problem_module(drill.problem)
    warm = problem.compile_warmups(drill, module, "cuda")
    recorded = []
    for w in warm:
        with cost.compile_only() as calls:
            try:
                w()
            except Exception:
                traceback.print_exc()
        recorded += calls
    print(d, "warmups", len(warm), "recorded calls", len(recorded), flush=True)
    t = time.perf_counter(); m = cost.Meter(False)
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(16) as pool:
        futs = [pool.submit(c) for c in recorded]
    for fu in futs:
        if fu.exception() is not None:
            print("compile error:", repr(fu.exception())[:300])
    print(d, "thread compiles", m.cost(), "in", round(time.perf_counter() - t, 3), flush=True)
    m = cost.Meter(False); t = time.perf_counter()
    found = problem.check_correctness(drill, module, False, "cuda", torch.Generator().manual_seed(0))
    print(d, "verdict after", m.cost(), round(time.perf_counter() - t, 3), all(c.passed for c in found.cases), flush=True)
