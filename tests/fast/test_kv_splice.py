"""The KV splice plan (pure logic): what an eviction keeps, drops, inserts and moves."""

from localpager.backends.llama import Splice, plan_splice


def test_an_evicted_run_is_dropped_and_the_rest_moved_after_the_new_bookmark():
    system, bookmark, evicted, resident = list(range(10)), [900, 901], list(range(100, 140)), list(range(200, 260))
    cached = system + evicted + resident + [7, 7]
    prompt = system + bookmark + resident + [300, 301]
    plan = plan_splice(cached, prompt)
    assert plan == Splice(keep=10, moved=50, insert=12, size=60)
    assert plan.reused == 70
    assert prompt[plan.keep:plan.insert] == bookmark
    assert cached[plan.moved:plan.moved + plan.size] == prompt[plan.insert:plan.insert + plan.size]


def test_plain_prefix_growth_needs_no_splice():
    cached = list(range(100))
    assert plan_splice(cached, cached + [5, 6, 7]) is None
    assert plan_splice(cached, cached[:90]) is None


def test_a_short_matching_run_is_not_worth_moving():
    cached = list(range(10)) + list(range(100, 140)) + list(range(200, 210))
    prompt = list(range(10)) + [900] + list(range(200, 210))
    assert plan_splice(cached, prompt) is None
    assert plan_splice(cached, prompt, min_size=8) == Splice(keep=10, moved=50, insert=11, size=10)


def test_nothing_in_common_after_the_prefix():
    assert plan_splice(list(range(100)), list(range(10)) + list(range(500, 600))) is None
