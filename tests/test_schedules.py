"""Layer 3 tests: the schedule executor (``physics.schedule``) and the schedules of the literature.

Closed forms where they are exact (GPipe, 1F1B, interleaved 1F1B on identical stages without communication),
every program runs every op once in an order its dependencies allow, the published memory facts, and a shape a
schedule cannot run is one error naming the key."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from geopipe_env.physics import schedule as sch
from geopipe_env.physics.schedule import B, D, F, W, SCHEDULES, ShapeError, program, simulate_schedule

REL = 1e-12


def _uniform(num_stages: int, m: int, name: str, v: int = 1, x: float = 0.0, lat: float = 0.0, fraction: float = 0.5):
    hops = np.full(num_stages - 1, x), np.full(num_stages - 1, lat)
    return simulate_schedule(np.ones(num_stages), np.full(num_stages, 2.0), *hops, m, name, v, input_gradient=fraction)


def _shapes():
    for name in SCHEDULES:
        for num_stages, m in itertools.product((2, 4, 6, 8), (2, 4, 8, 12, 16)):
            v = 2 if name in (sch.INTERLEAVED, sch.HANAYO) else 1
            try:
                sch.check_shape(name, num_stages, m, v)
            except ShapeError:
                continue
            yield name, num_stages, m, v


@pytest.mark.parametrize("name, num_stages, m, v", list(_shapes()))
def test_every_program_runs_each_op_once(name, num_stages, m, v):
    """Each chunk runs F, and B (or D and W), once per micro-batch of its pipeline, on its own device; the whole
    iteration finishes (the order has no cycle), and every device is busy exactly its ops' time."""
    prog = program(name, num_stages, m, v)
    f, d, w = sch.chunk_times(prog, np.ones(num_stages), np.full(num_stages, 2.0), 0.5)
    link_of, link_x, link_lat = sch.links(num_stages, np.full(num_stages - 1, 0.3), np.full(num_stages - 1, 0.1), 0.3, 0.1)
    act = np.ones(prog.num_chunks)
    run = sch.execute(prog, f, d, w, link_of, link_x, link_lat, act, act * sch.W_MEMORY_FRACTION,
                      np.full(num_stages, float(2 * num_stages)), record=True)
    kinds = (F, D, W) if prog.split else (F, B)
    seen = sorted((k, c, j) for ops in run.order for k, c, j in ops)
    per_pipe = prog.num_chunks // prog.num_pipelines
    want = sorted((k, c, j) for c in range(prog.num_chunks) for j in range(m) if j % prog.num_pipelines == c // per_pipe
                  for k in kinds)
    assert seen == want
    for device, ops in enumerate(run.order):
        assert all(prog.chunk_device[c] == device for _, c, _ in ops)
    np.testing.assert_allclose(run.busy_s, np.full(num_stages, 3.0 * m), rtol=REL)  # F = 1, B = 2 per stage
    assert run.total_s >= run.busy_s.max()


@pytest.mark.parametrize("num_stages, m", [(s, m) for s in (2, 4, 8) for m in (4, 8, 16, 24) if m % s == 0])
def test_interleaved_one_f_one_b_closed_form(num_stages, m):
    """Megatron-LM's interleaved schedule on identical stages without communication takes M·(f+b) + (S−1)·(f+b)/v:
    its bubble is 1F1B's divided by the v chunks per device (Narayanan et al., SC'21, §2.2)."""
    for v in (2, 3, 4):
        total = _uniform(num_stages, m, sch.INTERLEAVED, v).total_s
        assert total == pytest.approx(m * 3.0 + (num_stages - 1) * 3.0 / v, rel=REL)


def test_gpipe_and_one_f_one_b_are_the_closed_form_with_messages():
    """On identical stages and hops the executor equals the analytic closed form (physics.pipeline), messages
    included."""
    from geopipe_env.physics import pipeline

    for num_stages, m, x, lat in itertools.product((2, 5, 8), (1, 3, 8, 20), (0.0, 0.5, 4.0), (0.0, 0.2)):
        for name in (sch.GPIPE, sch.ONE_F_ONE_B):
            exact = _uniform(num_stages, m, name, x=x, lat=lat).total_s
            closed = float(pipeline.uniform_iteration_time_s(1.0, num_stages, x, lat, m, name))
            assert exact == pytest.approx(closed, rel=1e-9), (name, num_stages, m, x, lat)


@pytest.mark.parametrize("num_stages, m", [(4, 8), (8, 8), (8, 16), (8, 32)])
def test_schedules_that_fill_the_bubble_beat_one_f_one_b_without_communication(num_stages, m):
    """Zero-bubble, V, Chimera and Hanayo schedules finish before 1F1B on identical stages when nothing waits for a
    message, and never before the devices' busy time."""
    one_f_one_b = _uniform(num_stages, m, sch.ONE_F_ONE_B).total_s
    for name, v in ((sch.ZB_H1, 1), (sch.ZBV, 1), (sch.CHIMERA, 1), (sch.HANAYO, 4), (sch.CROSSPIPE_GREEDY, 1)):
        total = _uniform(num_stages, m, name, v).total_s
        assert 3.0 * m <= total < one_f_one_b, (name, total, one_f_one_b)


def test_chimera_peak_activation_is_within_its_published_range():
    """Chimera's activation peak per device lies within [(S/2 + 1), S] micro-batches with M = S (Li and Hoefler,
    SC'21), against 1F1B's S at its first stage and GPipe's M everywhere."""
    for num_stages in (4, 8, 16):
        peak = _uniform(num_stages, num_stages, sch.CHIMERA).peak_activation
        assert peak.min() >= num_stages / 2 + 1 and peak.max() <= num_stages


def test_zero_bubble_weight_gradients_wait_within_the_one_f_one_b_peak():
    """ZB-H1 defers weight gradients into the bubbles but holds no more activations than 1F1B's first stage."""
    for num_stages, m in ((4, 8), (8, 16)):
        run = _uniform(num_stages, m, sch.ZB_H1)
        assert run.peak_activation.max() <= num_stages + 1e-9
        assert run.total_s < _uniform(num_stages, m, sch.ONE_F_ONE_B).total_s


def test_greedy_schedule_keeps_its_activation_budget():
    """crosspipe-greedy never holds more activations than its budget, at any link speed."""
    for x in (0.0, 1.0, 5.0):
        run = _uniform(8, 16, sch.CROSSPIPE_GREEDY, x=x, lat=0.5)
        assert run.peak_activation.max() <= 8.0 + 1e-9


def test_messages_on_a_shared_link_wait_in_order():
    """Two devices that send on one link: the later request waits for the earlier message (hand trace)."""
    # Three devices 0 → 1 → 2 on the interleaved wrap: device 2's chunk sends to device 0 on the wrap link while
    # device 0 keeps computing. A direct check: one link, two producers 0.5 apart, transfer 2 → the second
    # message arrives 2 after the first.
    prog = program(sch.ONE_F_ONE_B, 3, 1)
    f = np.array([1.0, 0.5, 1.0])
    link_of = np.zeros(9, dtype=np.int64)  # every pair on one link
    run = sch.execute(prog, f, 2.0 * f, np.zeros(3), link_of, np.array([2.0]), np.array([0.0]), np.ones(3),
                      np.ones(3), np.zeros(3), record=True)
    # F0 0–1 → link 1–3 → F1 3–3.5 → link 3.5–5.5 → F2 5.5–6.5, B2 6.5–8.5 → link 8.5–10.5 → B1 10.5–11.5 →
    # link 11.5–13.5 → B0 13.5–15.5
    assert run.total_s == pytest.approx(15.5, rel=REL)
    assert run.starts[(B, 0, 0)] == pytest.approx(13.5, rel=REL)


@pytest.mark.parametrize("name, num_stages, m, v, key", [
    ("zero-bubble", 4, 4, 1, "pipeline_schedule"),
    (sch.CHIMERA, 5, 4, 1, "pipeline_stages"),
    (sch.CHIMERA, 4, 5, 1, "num_microbatches"),
    (sch.INTERLEAVED, 4, 6, 2, "num_microbatches"),
    (sch.INTERLEAVED, 4, 8, 1, "virtual_stages"),
    (sch.HANAYO, 4, 8, 3, "virtual_stages"),
    (sch.ZBV, 4, 8, 2, "virtual_stages"),
])
def test_shapes_a_schedule_cannot_run_name_the_key(name, num_stages, m, v, key):
    with pytest.raises(ShapeError) as exc:
        sch.check_shape(name, num_stages, m, v)
    assert str(exc.value).startswith(f"{key}:") and "\n" not in str(exc.value)


def test_the_split_backward_follows_the_zero_bubble_flops():
    """D's share of the backward is (24h + 8s)/(48h + 8s): a half when the sequence is short against the hidden size,
    more when attention dominates."""
    assert sch.input_gradient_fraction(8192, 0) == pytest.approx(0.5)
    assert 0.5 < sch.input_gradient_fraction(8192, 4096) < sch.input_gradient_fraction(4096, 32768) < 1.0


@pytest.mark.parametrize("name, num_stages, m, v", list(_shapes()) + [(sch.HANAYO, 4, 16, 4), (sch.INTERLEAVED, 4, 16, 4)])
def test_the_memory_model_is_the_peak_the_executor_measures(name, num_stages, m, v):
    """``in_flight_stages`` (what a stage's memory is sized by) is never below the activations the busiest device
    holds when the program runs, and equals them for the programs of fixed order (the greedy ones stay within it:
    it is their budget)."""
    peak = float(_uniform(num_stages, m, name, v).peak_activation.max())
    declared = sch.in_flight_stages(name, num_stages, m, v)
    assert peak <= declared + REL
    if name not in (sch.ZBV, sch.CROSSPIPE_GREEDY):
        assert peak == pytest.approx(declared, rel=REL), (name, num_stages, m, v)


def test_link_messages_count_each_chunk_boundary_once_each_way():
    """Per micro-batch a link carries one message per chunk boundary that crosses it: 1 under 1F1B and Chimera,
    2 under ZB-V (down, then back up), v under interleaved 1F1B (plus its wrap on links of its own)."""
    def most(name: str, v: int = 1) -> float:
        prog = program(name, 4, 8, v)
        link_of, link_x, _ = sch.links(4, np.zeros(3), np.zeros(3))
        return float(sch.link_messages(prog, link_of, link_x.shape[0]).max())

    assert most(sch.ONE_F_ONE_B) == most(sch.CHIMERA) == most(sch.ZB_H1) == 1.0
    assert most(sch.ZBV) == most(sch.CROSSPIPE_GREEDY) == 2.0
    assert most(sch.INTERLEAVED, 3) == 3.0


def test_a_cadence_floor_slows_only_links_between_regions():
    """``ExecutorModel.total_s`` at a cadence floor equals the executor run with each WAN link's message time raised
    to the floor, and links inside a region keep theirs."""
    forward = np.array([1.0, 1.2, 0.9, 1.1])
    model = sch.executor_model(forward, 2.0 * forward, np.full(3, 0.1), np.full(3, 0.05), 8, sch.ZBV,
                               input_gradient=0.6, wan_hops=np.array([1]))
    for floor in (0.0, 0.05, 0.4, 2.0):
        x = model.link_x.copy()
        x[[1, 4]] = np.maximum(x[[1, 4]], floor)  # hop 1, both ways
        run = sch.execute(model.program, model.chunk_f, model.chunk_d, model.chunk_w, model.link_of, x, model.link_lat,
                          model.act_f, model.act_w, model.budget)
        assert model.total_s(floor) == run.total_s
    assert model.total_s(2.0) > model.total_s(0.0)


@pytest.mark.parametrize("seed", range(4))
def test_the_one_pass_run_equals_the_event_simulation(seed):
    """Programs of fixed order on links of one sender run in one pass (``_run_fixed``); the event simulation
    (``_run_events``) gives the same iteration time, device ends, busy times and peaks, bit for bit, on unequal
    stages with slow WAN hops."""
    rng = np.random.default_rng(seed)
    checked = 0
    for trial in range(120):
        name = [s for s in SCHEDULES if s != sch.CROSSPIPE_GREEDY][trial % 7]
        num_stages = int(rng.choice([2, 3, 4, 6, 8]))
        v = int(rng.choice([2, 4])) if name in (sch.INTERLEAVED, sch.HANAYO) else 1
        num_stages += num_stages % 2 if name == sch.CHIMERA else 0
        m = num_stages * int(rng.integers(1, 4)) if name == sch.INTERLEAVED else int(rng.choice([1, 2, 4, 8, 16]))
        m += m % 2 if name == sch.CHIMERA else 0
        forward = rng.uniform(0.5, 1.5, num_stages)
        slow = rng.random(num_stages - 1) < 0.3
        x = np.where(slow, rng.uniform(0.5, 4.0, num_stages - 1), rng.uniform(0.0, 0.05, num_stages - 1))
        lat = np.where(slow, rng.uniform(0.1, 3.0, num_stages - 1), 0.01)
        try:
            model = sch.executor_model(forward, 2.0 * forward, x, lat, m, name, v, 0.55, np.flatnonzero(slow), (1.0, 0.5))
        except ShapeError:
            continue
        common = (model.program.packed, model.chunk_f, model.chunk_d, model.chunk_w, model.link_of, model.link_x,
                  model.link_lat, model.act_f, model.act_w)
        outs = []
        for one_pass in (True, False):
            busy, end, peak = np.zeros(num_stages), np.zeros(num_stages), np.zeros(num_stages)
            record = (np.zeros((0, 4), dtype=np.int64), np.zeros(0))
            if one_pass:
                total = sch._run_fixed(*common, busy, end, peak, *record)
            else:
                total = sch._run_events(*common, model.budget, busy, end, peak, *record, 1 << 16)
            outs.append((total, busy, end, peak))
        (t1, b1, e1, p1), (t2, b2, e2, p2) = outs
        assert t1 == t2 and (b1 == b2).all() and (e1 == e2).all() and (p1 == p2).all(), (name, num_stages, m, v)
        checked += 1
    assert checked > 80


def test_an_event_queue_too_small_is_run_again_with_the_same_result():
    """The event simulation's queue has a fixed capacity: a run that fills it returns −1, and the run again with a
    larger queue gives what one large enough at once gives (times, busy, ends, peaks and the recorded order)."""
    model = sch.executor_model(np.linspace(1.0, 2.0, 8), np.linspace(2.0, 4.0, 8), np.full(7, 0.3), np.full(7, 0.1),
                               32, sch.CROSSPIPE_GREEDY, input_gradient=0.55, wan_hops=np.array([2, 5]))
    args = (model.program.packed, model.chunk_f, model.chunk_d, model.chunk_w, model.link_of, model.link_x,
            model.link_lat, model.act_f, model.act_w, model.budget)
    n = model.program.num_chunks * 32 * 3
    runs = []
    for capacity in (2, 1 << 16):
        outs = (np.zeros(8), np.zeros(8), np.zeros(8), np.full((n, 4), -1, dtype=np.int64), np.zeros(n))
        if capacity == 2:
            assert sch._run_events(*args, *outs, capacity) == -1.0
        runs.append((sch._events_in_queue(*args, *outs, capacity), *outs))
    (total_small, *small), (total_large, *large) = runs
    assert total_small == total_large > 0.0
    assert all((a == b).all() for a, b in zip(small, large))


@pytest.mark.parametrize("name, num_stages, m, v", list(_shapes()))
def test_every_fixed_program_on_a_pipeline_takes_the_one_pass_run(name, num_stages, m, v):
    """Every fixed-order program on a pipeline's links (each boundary two links, the wrap two more) sends on each
    link from one device only, so it takes the one-pass run; pairs of devices it sends nothing between do not
    count. Two devices sending on one link do."""
    prog = program(name, num_stages, m, v)
    link_of, link_x, _ = sch.links(num_stages, np.ones(num_stages - 1), np.zeros(num_stages - 1), 1.0, 0.0)
    assert sch._single_senders(prog.packed, link_of, link_x.shape[0])
    if num_stages >= 3 and sch.device_boundaries(prog):
        shared = link_of.copy()
        (a, b), (c, d) = sch.device_boundaries(prog)[:2]
        shared[c * num_stages + d] = shared[a * num_stages + b]  # the second boundary's sender on the first's link
        assert not sch._single_senders(prog.packed, shared, link_x.shape[0])


@pytest.mark.parametrize("seed", range(3))
def test_the_lower_bound_never_exceeds_the_iteration_time(seed):
    """``ExecutorModel.lower_bound_s`` (each device's work back to back, each link's messages one after another)
    is at most the executed iteration time, for every schedule on unequal stages with slow WAN hops; a cadence
    floor no WAN link's message time lies below times as no floor."""
    rng = np.random.default_rng(seed)
    checked = 0
    for trial in range(64):
        name = SCHEDULES[trial % len(SCHEDULES)]
        num_stages = int(rng.choice([2, 4, 6, 8]))
        v = int(rng.choice([2, 4])) if name in (sch.INTERLEAVED, sch.HANAYO) else 1
        m = num_stages * int(rng.integers(1, 4))
        forward = rng.uniform(0.5, 1.5, num_stages)
        slow = rng.random(num_stages - 1) < 0.5
        x = np.where(slow, rng.uniform(0.5, 6.0, num_stages - 1), rng.uniform(0.0, 0.05, num_stages - 1))
        lat = np.where(slow, rng.uniform(0.1, 3.0, num_stages - 1), 0.01)
        try:
            model = sch.executor_model(forward, 2.0 * forward, x, lat, m, name, v, 0.55, np.flatnonzero(slow),
                                       (1.0, 0.5), bool(slow.any()))
        except ShapeError:
            continue
        total = model.execute().total_s
        assert model.lower_bound_s() <= total, (name, num_stages, m, v)
        if slow.any():  # the executor itself, not the memo (which keys such a floor as 0)
            assert model._run(model.min_wan_x) == total
        checked += 1
    assert checked > 40


def test_the_registry_gives_each_schedule_a_stable_code():
    """Each schedule has its own code, and the codes in use never change (the observation reads code ÷ 7: a
    schedule added later takes the next code); the counts and the closed-form set follow from the registry, and
    an unknown name is one error naming the key."""
    assert {name: sch.SPECS[name].code for name in SCHEDULES} == {
        "gpipe": 0, "1f1b": 1, "interleaved-1f1b": 2, "zb-h1": 3, "zbv": 4, "chimera": 5, "hanayo": 6,
        "crosspipe-greedy": 7,
    }
    assert list(SCHEDULES) == sorted(sch.SPECS, key=lambda name: sch.SPECS[name].code)
    assert sch.MAX_SCHEDULES == len(sch.SPECS)
    assert sch.CLOSED_FORM_SCHEDULES == (sch.GPIPE, sch.ONE_F_ONE_B)
    with pytest.raises(ShapeError, match="^pipeline_schedule: got 'pipedream'"):
        sch.spec("pipedream")


def test_no_module_tells_schedules_apart_but_the_registry():
    """Outside ``physics/schedule.py`` no module compares a schedule name or placement kind: they ask the
    registry (``schedule.spec``)."""
    import ast
    from pathlib import Path

    import geopipe_env

    names = {"GPIPE", "ONE_F_ONE_B", "INTERLEAVED", "ZB_H1", "ZBV", "CHIMERA", "HANAYO", "CROSSPIPE_GREEDY"}
    root = Path(geopipe_env.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).as_posix() == "physics/schedule.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                operands = [node.left, *node.comparators]
                for operand in operands:
                    named = operand.attr if isinstance(operand, ast.Attribute) else getattr(operand, "id", None)
                    literal = isinstance(operand, ast.Constant) and operand.value in sch.SPECS
                    if named in names or literal or (isinstance(operand, ast.Attribute) and operand.attr == "placement"):
                        found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert not found, found
