"""The problem seam: every registered problem implements the Problem protocol, and
the runner's import-free list of problems that run one shape alone agrees with them."""

import pytest

from tutor.harness.problems import PROBLEMS, SHAPE_ONLY_PROBLEMS, Problem, UnknownProblem, problem_for


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_every_registered_problem_is_a_problem(name):
    problem = problem_for(name)
    assert isinstance(problem, Problem)
    assert callable(problem.check_correctness) and callable(problem.timing_launches)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_the_runners_shape_only_list_matches_the_capability(name):
    assert (name in SHAPE_ONLY_PROBLEMS) == (problem_for(name).check_one_shape is not None)


def test_an_unknown_problem_says_which_are_known():
    with pytest.raises(UnknownProblem, match="known: attention"):
        problem_for("no_such_problem")
