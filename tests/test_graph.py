"""The CUDA-graph launch (solution/graph.py): the cache's bounds and error paths on the CPU with a
fake driver, and how launches are recorded; on a GPU, correctness when graphs are reused across calls, shapes, streams, threads and
inside a caller's own graph capture."""

from __future__ import annotations

import ctypes
import random
import threading
from types import SimpleNamespace

import pytest
import torch

import reference
from reference.fixtures import FIXTURE_TOLERANCE
from solution import ffn_backward, graph
from solution.arguments import Dims
from solution.configs import launch_plan
from solution.launches import Buffer, Launch, describe_call


# --- CPU: the cache and the error paths ---------------------------------------------------------

def test_graph_cache_keeps_the_most_recently_used():
    cache = graph.GraphCache(capacity=2)
    built = []

    def build(name):
        built.append(name)
        return SimpleNamespace(name=name)

    assert cache.get("a", lambda: build("a")).name == "a"
    cache.get("b", lambda: build("b"))
    cache.get("a", lambda: build("a again"))  # a hit: a becomes the most recent
    cache.get("c", lambda: build("c"))  # evicts b, the least recently used
    cache.get("a", lambda: build("a again"))
    cache.get("b", lambda: build("b again"))
    assert built == ["a", "b", "c", "b again"]
    assert len(cache) == 2


class FakeDriver:
    """Answers every driver call with success, creating a handle in each handle out-parameter,
    except those named in `failing`, which return CUresult 1. A stream capture makes a graph whose
    kernel nodes are the launches recorded in it (read back by cuGraphGetNodes and
    cuGraphKernelNodeGetParams_v2)."""

    def __init__(self, *failing: str):
        self.failing = failing
        self.calls: list[str] = []
        self.recording: list[tuple] = []  # the launches of the capture in progress
        self.nodes: list[tuple] = []  # the kernel nodes of the last graph captured

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            if name in self.failing:
                return 1
            for arg in args:
                handle = getattr(arg, "_obj", None)  # ctypes.byref(c_void_p())
                if isinstance(handle, ctypes.c_void_p) and not handle.value:
                    handle.value = 0x1000 + len(self.calls)
            own = self.__dict__.get(f"_{name}")  # a test's own answer
            if own is not None:
                return own(*args)
            method = getattr(type(self), f"_{name}", None)
            return method(self, *args) if method else 0
        return call

    FAKE_KERNEL_PARAMETERS = 4  # x, n, the two scratch pointers: 8 bytes each

    def _cuLaunchKernel(self, function, grid, _y, _z, threads, _ty, _tz, shared, _stream, params, _extra):
        """The node keeps a copy of each parameter's value, as the driver does."""
        values = [ctypes.create_string_buffer(ctypes.string_at(params[i], 8), 8)
                  for i in range(self.FAKE_KERNEL_PARAMETERS)]
        self.recording.append((function.value, grid.value, threads.value, shared.value, values))
        return 0

    def _cuStreamEndCapture(self, stream, graph_out):
        self.nodes, self.recording = self.recording, []
        return 0

    def _cuGraphGetNodes(self, graph_, nodes, count):
        if nodes is not None:
            for k in range(len(self.nodes)):
                nodes[k] = 0x100 + k
        count._obj.value = len(self.nodes)
        return 0

    def _cuGraphKernelNodeGetParams_v2(self, node, params):
        function, grid, threads, shared, values = self.nodes[node.value - 0x100]
        recorded = params._obj
        recorded.func, recorded.gridDimX, recorded.blockDimX, recorded.sharedMemBytes = function, grid, threads, shared
        recorded.kernelParams = (ctypes.c_void_p * len(values))(*map(ctypes.addressof, values))
        return 0


def _fake_call_graph_inputs(afters: tuple[tuple[int, ...], ...] = ((),), buffers: tuple[str, ...] = ()):
    """A call of one fake kernel launched once per entry of `afters` (its `after` lists), reading
    buffer "x" or the launch's entry of `buffers`."""
    kernel = SimpleNamespace(arg_names=["x", "n"])
    names = buffers or ("x",) * len(afters)
    launches = tuple(Launch(kernel, 3, (Buffer(name, torch.float32, (4,)), 4), {}, {}, after=a)
                     for a, name in zip(afters, names))
    compiled = SimpleNamespace(
        name="fake_kernel", function=1234, src=SimpleNamespace(signature={"x": "*fp32", "n": "i64"}),
        metadata=SimpleNamespace(global_scratch_size=0, profile_scratch_size=0, num_warps=4, shared=0,
                                 tensordesc_meta=None))
    return (SimpleNamespace(launches=launches, workspaces=(), workspace_offsets=(), workspace_bytes=1),
            [compiled] * len(afters))


def test_a_failed_build_frees_what_it_made_and_keeps_the_error(monkeypatch):
    driver = FakeDriver("cuEventCreate")
    monkeypatch.setattr(graph, "_driver", driver)
    call, compiled = _fake_call_graph_inputs()
    with pytest.raises(RuntimeError, match="^cuEventCreate failed"):
        graph.CallGraph(call, compiled, ("x",))
    assert driver.calls[-1] == "cuStreamDestroy_v2", driver.calls


def test_a_failed_cleanup_does_not_hide_the_error(monkeypatch):
    """The build's own error is raised, the failure to free the streams noted on it."""
    monkeypatch.setattr(graph, "_driver", FakeDriver("cuEventCreate", "cuStreamDestroy_v2"))
    call, compiled = _fake_call_graph_inputs()
    with pytest.raises(RuntimeError, match="^cuEventCreate failed") as raised:
        graph.CallGraph(call, compiled, ("x",))
    assert any("cuStreamDestroy failed" in note for note in raised.value.__notes__)


def _launch_once(driver: FakeDriver, monkeypatch, afters=((),)) -> graph.CallGraph:
    monkeypatch.setattr(graph, "_driver", driver)
    call, compiled = _fake_call_graph_inputs(afters)
    call_graph = graph.CallGraph(call, compiled, ("x",))
    driver.calls.clear()
    call_graph.launch((0x2000,), 1e-5, 0x3000, stream=0x4000)
    return call_graph


def _driver_calls(driver: FakeDriver) -> list[str]:
    return [c for c in driver.calls if c.startswith(("cuStream", "cuLaunch", "cuGraph"))]


def test_the_first_call_records_later_calls_write_their_values_into_the_executable_graph(monkeypatch):
    driver = FakeDriver()
    call_graph = _launch_once(driver, monkeypatch, afters=((), (0,)))
    recorded = ["cuStreamBeginCapture_v2", "cuLaunchKernel", "cuLaunchKernel", "cuStreamEndCapture"]
    found = ["cuGraphGetNodes", "cuGraphGetNodes"] + ["cuGraphNodeGetType", "cuGraphKernelNodeGetParams_v2"] * 2
    assert _driver_calls(driver) == ["cuStreamIsCapturing", *recorded, *found, "cuGraphInstantiateWithFlags",
                                     "cuGraphLaunch"]
    driver.calls.clear()
    call_graph.launch((0x2100,), 1e-5, 0x3000, stream=0x4000)  # new values: no recording, an update
    assert _driver_calls(driver) == ["cuStreamIsCapturing", "cuGraphExecKernelNodeSetParams_v2",
                                     "cuGraphExecKernelNodeSetParams_v2", "cuGraphLaunch"]
    assert call_graph.params[0].pointer_slots[0][1].value == 0x2100


def test_each_launch_updates_the_node_recorded_with_its_values(monkeypatch):
    """Two launches of one kernel that read different buffers, their nodes listed in any order:
    each launch's update goes to the node recorded with its own values."""
    driver = FakeDriver()
    monkeypatch.setattr(graph, "_driver", driver)
    call, compiled = _fake_call_graph_inputs(afters=((), (0,)), buffers=("x", "y"))
    call_graph = graph.CallGraph(call, compiled, ("x", "y"))
    call_graph.launch((0x2000, 0x2800), 1e-5, 0x3000, stream=0x4000)
    driver.nodes.reverse()
    steps = call_graph._node_param_steps(ctypes.c_void_p(0x7000))
    recorded_x = [ctypes.c_uint64.from_buffer(driver.nodes[node.value - 0x100][4][0]).value
                  for _, (_, node, _), _ in steps]
    assert recorded_x == [0x2000, 0x2800]


def test_a_node_is_recognised_by_its_function_launch_shape_and_values():
    call, compiled = _fake_call_graph_inputs()
    params = graph.KernelParams(call.launches[0], compiled[0])
    params.pointer_slots[0][1].value = 0x2000
    copies = [ctypes.create_string_buffer(ctypes.string_at(params.array[i], size), size)
              for i, size in enumerate(params.sizes)]

    def node(**changes):
        recorded = graph._KernelNodeParams(func=1234, gridDimX=3, blockDimX=128, sharedMemBytes=0,
                                           kernelParams=(ctypes.c_void_p * len(copies))(*map(ctypes.addressof, copies)))
        for field, value in changes.items():
            setattr(recorded, field, value)
        return recorded

    assert params.recorded_as(node())
    assert not any(params.recorded_as(node(**c)) for c in ({"func": 999}, {"gridDimX": 4}, {"sharedMemBytes": 16}))
    params.pointer_slots[0][1].value = 0x2100
    assert not params.recorded_as(node())


def test_a_recording_whose_nodes_match_no_launch_is_an_error_and_is_freed(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(driver, "_cuStreamEndCapture", lambda stream, graph_out: 0)  # a graph without the nodes
    with pytest.raises(RuntimeError, match="^launch 0 has no kernel node in the recorded graph"):
        _launch_once(driver, monkeypatch)
    assert "cuGraphDestroy" in driver.calls and "cuGraphLaunch" not in driver.calls


def test_a_call_with_the_last_calls_values_launches_the_kept_graph_as_it_is(monkeypatch):
    driver = FakeDriver()
    call_graph = _launch_once(driver, monkeypatch)
    driver.calls.clear()
    call_graph.launch((0x2000,), 1e-5, 0x3000, stream=0x4000)
    assert _driver_calls(driver) == ["cuStreamIsCapturing", "cuGraphLaunch"]
    for changed in [((0x2100,), 1e-5, 0x3000), ((0x2100,), 1e-6, 0x3000), ((0x2100,), 1e-6, 0x3100)]:
        driver.calls.clear()
        call_graph.launch(*changed, stream=0x4000)
        assert "cuGraphExecKernelNodeSetParams_v2" in driver.calls, changed


@pytest.mark.parametrize("failing", ["cuLaunchKernel", "cuGraphExecKernelNodeSetParams_v2"])
def test_a_failed_update_is_done_again_by_the_next_call(failing, monkeypatch):
    """A recording (first call) or node update (later calls) that failed leaves the graph's values
    unknown: the next call with the same values writes them again instead of launching the graph."""
    driver = FakeDriver()
    monkeypatch.setattr(graph, "_driver", driver)
    call, compiled = _fake_call_graph_inputs()
    call_graph = graph.CallGraph(call, compiled, ("x",))
    if failing != "cuLaunchKernel":
        call_graph.launch((0x2000,), 1e-5, 0x3000, stream=0x4000)
    driver.failing = (failing,)
    with pytest.raises(RuntimeError, match=f"^{failing.removesuffix('_v2')} failed"):
        call_graph.launch((0x2100,), 1e-5, 0x3000, stream=0x4000)
    driver.failing = ()
    driver.calls.clear()
    call_graph.launch((0x2100,), 1e-5, 0x3000, stream=0x4000)  # the same values: written, not skipped
    writes = "cuStreamBeginCapture_v2" if failing == "cuLaunchKernel" else "cuGraphExecKernelNodeSetParams_v2"
    assert writes in driver.calls and driver.calls[-1] == "cuGraphLaunch", driver.calls


def test_a_descriptor_is_encoded_only_where_its_address_changes(monkeypatch):
    driver = FakeDriver()
    monkeypatch.setattr(graph, "_driver", driver)
    tiles = SimpleNamespace(buffer=SimpleNamespace(shape=(64, 32), name="x"))
    descriptor = graph._Descriptor(tiles, {"block_size": [16, 32], "elem_type": 6, "elem_size": 2, "swizzle": 3})
    for base in (0x1000, 0x1000, 0x2000, 0x2000, 0x1000):
        descriptor.encode(base)
    assert driver.calls == ["cuTensorMapEncodeTiled"] * 3


def test_a_failed_instantiation_is_recorded_anew_by_the_next_call(monkeypatch):
    """The recording whose instantiation failed is freed, the launches recorded again and the
    executable graph instantiated from the new recording."""
    driver = FakeDriver("cuGraphInstantiateWithFlags")
    monkeypatch.setattr(graph, "_driver", driver)
    call_graph = graph.CallGraph(*_fake_call_graph_inputs(), ("x",))
    with pytest.raises(RuntimeError, match="^cuGraphInstantiate failed"):
        call_graph.launch((0x2000,), 1e-5, 0x3000, stream=0x4000)
    first_recording = call_graph._recording.value
    driver.failing = ()
    driver.calls.clear()
    call_graph.launch((0x2000,), 1e-5, 0x3000, stream=0x4000)
    assert _driver_calls(driver)[:3] == ["cuStreamIsCapturing", "cuGraphDestroy", "cuStreamBeginCapture_v2"]
    assert _driver_calls(driver)[-2:] == ["cuGraphInstantiateWithFlags", "cuGraphLaunch"]
    assert call_graph._recording.value != first_recording and call_graph.graph_exec.value


def test_a_failed_node_update_is_an_error_and_keeps_the_graphs(monkeypatch):
    """An update error (e.g. a sticky error from a faulted kernel) is raised; the recording and the
    executable graph stay, for the next call to write its values into."""
    driver = FakeDriver()
    call_graph = _launch_once(driver, monkeypatch)
    driver.failing = ("cuGraphExecKernelNodeSetParams_v2",)
    driver.calls.clear()
    with pytest.raises(RuntimeError, match=r"^cuGraphExecKernelNodeSetParams failed: CUresult 1"):
        call_graph.launch((0x2100,), 1e-5, 0x3000, stream=0x4000)
    assert "cuGraphDestroy" not in driver.calls and call_graph.graph_exec.value and call_graph._recording.value


def test_a_failed_free_of_the_recording_does_not_hide_the_error(monkeypatch):
    driver = FakeDriver("cuGraphNodeGetType", "cuGraphDestroy")
    with pytest.raises(RuntimeError, match="^cuGraphNodeGetType failed") as raised:
        _launch_once(driver, monkeypatch)
    assert any("cuGraphDestroy then failed too" in note for note in raised.value.__notes__)


def test_destroy_frees_the_recording_and_the_executable_graph(monkeypatch):
    driver = FakeDriver()
    call_graph = _launch_once(driver, monkeypatch)
    driver.calls.clear()
    call_graph.destroy()
    assert driver.calls[:2] == ["cuGraphDestroy", "cuGraphExecDestroy"]
    assert not call_graph._recording.value and not call_graph.graph_exec.value
    assert all(arguments[0] is call_graph.graph_exec for _, arguments, _ in call_graph._set_node_params)


@pytest.mark.parametrize("failing", ["cuLaunchKernel", "cuGraphInstantiateWithFlags"])
def test_a_failed_first_call_ends_the_capture_and_launches_nothing(failing, monkeypatch):
    driver = FakeDriver(failing)
    with pytest.raises(RuntimeError, match=f"^{failing.removesuffix('WithFlags')} failed"):
        _launch_once(driver, monkeypatch)
    assert "cuStreamEndCapture" in driver.calls  # the private stream is not left capturing
    after_failure = driver.calls[driver.calls.index(failing) + 1:]
    assert "cuGraphLaunch" not in after_failure, driver.calls
    if failing == "cuLaunchKernel":  # the recording is freed
        assert "cuGraphDestroy" in after_failure, driver.calls


class CapturingDriver(FakeDriver):
    """The caller's stream is being captured."""

    def cuStreamIsCapturing(self, stream, capturing):
        self.calls.append("cuStreamIsCapturing")
        capturing._obj.value = 1
        return 0


def test_inside_a_callers_capture_the_launches_join_it_one_after_the_other(monkeypatch):
    """Even where stages 3 and 4 may overlap: no private stream is drawn into the caller's capture."""
    driver = CapturingDriver()
    call_graph = _launch_once(driver, monkeypatch, afters=((), (0,), (1,), (1,)))
    assert driver.calls[-5:] == ["cuStreamIsCapturing"] + ["cuLaunchKernel"] * 4, driver.calls
    assert call_graph._caller_stream.value == 0x4000
    assert all(arguments[8] is call_graph._caller_stream for _, arguments, _ in call_graph._serial_steps)


def _after(*afters: tuple[int, ...]) -> list:
    return [SimpleNamespace(after=a, programmatic=False) for a in afters]


def test_recording_steps_of_a_chain_use_one_stream():
    assert graph.recording_steps(_after((), (0,), (1,), (2,))) == (
        1, [("launch", 0, 0), ("launch", 0, 1), ("launch", 0, 2), ("launch", 0, 3)])


def test_recording_steps_fork_and_join():
    """Stages 3 and 4 both after stage 2: stage 4 on a second stream, joined back at the end."""
    assert graph.recording_steps(_after((), (0,), (1,), (1,))) == (2, [
        ("launch", 0, 0), ("launch", 0, 1), ("record", 0, 1), ("launch", 0, 2),
        ("wait", 1, 1), ("launch", 1, 3), ("record", 1, 3), ("wait", 0, 3)])


def test_recording_steps_of_programmatic_launches():
    """A programmatic launch follows its one dependency on that one's stream (the capture makes the
    edge programmatic); one that would start a stream, or wait for another event, is refused."""
    chain = [SimpleNamespace(after=a, programmatic=p) for a, p in (((), False), ((0,), True), ((1,), True), ((1,), False))]
    assert graph.recording_steps(chain) == (2, [
        ("launch", 0, 0), ("launch", 0, 1), ("record", 0, 1), ("launch", 0, 2),
        ("wait", 1, 1), ("launch", 1, 3), ("record", 1, 3), ("wait", 0, 3)])
    for afters in (((), (0,), (1,), (1,)), ((), (0,), (0, 1))):
        launches = _after(*afters)
        launches[-1].programmatic = True
        with pytest.raises(ValueError, match="programmatic launch"):
            graph.recording_steps(launches)


def test_recording_steps_of_independent_starts_wait_for_the_start_event():
    count, steps = graph.recording_steps(_after((), (), (0, 1)))
    assert count == 2
    assert steps == [("record", 0, 3), ("launch", 0, 0), ("wait", 1, 3), ("launch", 1, 1), ("record", 1, 1),
                     ("wait", 0, 1), ("launch", 0, 2)]


def test_a_shape_has_one_call_description():
    """describe_call is cached: a shape's launches are described once, not on every call (a lost
    lru_cache made every call build its graph anew at fc19175, when the graph cache was keyed by the
    description; it is now keyed by the shape)."""
    def dims():
        return Dims(tokens=16, hidden=512, intermediate=2048, device=torch.device("cpu"))
    assert describe_call(dims(), launch_plan(dims().device)) is describe_call(dims(), launch_plan(dims().device))


def test_kernel_params_refuse_what_they_cannot_lay_out():
    call, compiled = _fake_call_graph_inputs()
    compiled[0].metadata.global_scratch_size = 64
    with pytest.raises(NotImplementedError, match="scratch memory"):
        graph.KernelParams(call.launches[0], compiled[0])


def _captured_dependencies(launch_count: int, steps: list[tuple]) -> dict[int, set[int]]:
    """What a stream capture makes of `steps`: each launch's dependencies (the nodes its stream ended
    on when it was recorded). Fails where a step uses a stream that has not joined the capture, or
    where a launch is not an ancestor of stream 0's end (a stream left unjoined)."""
    ends = {0: set()}  # streams in the capture: the nodes the next node there will depend on
    events: dict[int, set[int]] = {}
    dependencies: dict[int, set[int]] = {}
    for kind, stream, index in steps:
        if kind == "wait":
            ends[stream] = ends.get(stream, set()) | events[index]
            continue
        assert stream in ends, f"stream {stream} used before it joined the capture"
        if kind == "record":
            events[index] = set(ends[stream])
        else:
            dependencies[index], ends[stream] = ends[stream], {index}
    reached, todo = set(), list(ends[0])
    while todo:
        node = todo.pop()
        if node not in reached:
            reached.add(node)
            todo.extend(dependencies[node])
    assert reached == set(range(launch_count)), "a stream was not joined into stream 0"
    return dependencies


def test_recording_steps_give_each_launch_exactly_its_after_list():
    rng = random.Random(0)
    for _ in range(2000):
        count = rng.randint(1, 7)
        afters = [tuple(sorted(rng.sample(range(j), rng.randint(0, j)))) for j in range(count)]
        stream_count, steps = graph.recording_steps(_after(*afters))
        assert {s for _, s, _ in steps} <= set(range(stream_count))
        assert _captured_dependencies(count, steps) == {j: set(a) for j, a in enumerate(afters)}, afters


# --- GPU: reuse -----------------------------------------------------------------------------------

def _draw(batch_size: int, seq_len: int, seed: int) -> tuple:
    torch.manual_seed(seed)
    return reference.make_inputs(batch_size, seq_len, torch.device("cuda"))


def _outputs(batch_size: int, seq_len: int) -> list[torch.Tensor]:
    shapes = reference.output_shapes(batch_size, seq_len)
    return [torch.full(shapes[n], float("nan"), device="cuda") for n in reference.OUTPUT_NAMES]


def _assert_matches(inputs: tuple, outputs: list[torch.Tensor]) -> None:
    for name, out, ref in zip(reference.OUTPUT_NAMES, outputs, reference.run(*inputs)):
        verdict = reference.check_output(out, ref, FIXTURE_TOLERANCE)
        assert verdict.passed, f"{name}: {verdict.reason}"


def _at_fresh_addresses(inputs: tuple, offset_elements: int) -> tuple:
    """The same values at other addresses (offset_elements x 4 bytes further into new storage)."""
    def moved(t):
        if not torch.is_tensor(t):
            return t
        storage = torch.empty(t.numel() + offset_elements, device=t.device)
        return storage[offset_elements:].view_as(t).copy_(t)
    return tuple(moved(t) for t in inputs)


@pytest.mark.gpu
def test_a_shape_builds_its_graph_once():
    inputs = _draw(1, 131, seed=11)
    ffn_backward.run(*inputs, *_outputs(1, 131))
    before = dict(ffn_backward._graphs._graphs)
    ffn_backward.run(*_at_fresh_addresses(inputs, offset_elements=64), *_outputs(1, 131))
    after = dict(ffn_backward._graphs._graphs)
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)


@pytest.mark.gpu
def test_two_shapes_alternating():
    for round_ in range(3):
        for batch, seq in ((1, 131), (2, 211)):
            inputs, outputs = _draw(batch, seq, seed=10 * round_ + seq), _outputs(batch, seq)
            ffn_backward.run(*inputs, *outputs)
            _assert_matches(inputs, outputs)


@pytest.mark.gpu
def test_same_outputs_reused_with_other_inputs():
    outputs = _outputs(1, 131)
    for seed in (1, 2, 3):
        inputs = _draw(1, 131, seed)
        ffn_backward.run(*inputs, *outputs)
        _assert_matches(inputs, outputs)


@pytest.mark.gpu
def test_same_buffers_with_new_contents():
    """The same input and output buffers every call (the executable graph relaunched as it is), new
    values written into the inputs in place between calls: each call computes from its values."""
    inputs, outputs = _draw(1, 131, seed=14), _outputs(1, 131)
    for seed in (15, 16, 17):
        for dst, src in zip(inputs, _draw(1, 131, seed)):
            if torch.is_tensor(dst):
                dst.copy_(src)
        for out in outputs:
            out.fill_(float("nan"))
        ffn_backward.run(*inputs, *outputs)
        _assert_matches(inputs, outputs)


@pytest.mark.gpu
def test_fresh_addresses_every_call():
    base = _draw(2, 211, seed=4)
    for i in range(4):
        inputs = _at_fresh_addresses(base, offset_elements=64 * (i + 1))  # 256-byte steps, as the benchmark's pool
        outputs = _outputs(2, 211)
        ffn_backward.run(*inputs, *outputs)
        _assert_matches(inputs, outputs)


@pytest.mark.gpu
def test_on_a_side_stream_while_another_stream_works():
    inputs, outputs = _draw(2, 211, seed=5), _outputs(2, 211)
    other_inputs, other_outputs = _draw(2, 211, seed=6), _outputs(2, 211)
    busy = torch.randn(4096, 4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ffn_backward.run(*inputs, *outputs)
    for _ in range(4):  # other work meanwhile on the default stream, the solution too
        busy = busy @ busy / 64
    ffn_backward.run(*other_inputs, *other_outputs)
    torch.cuda.synchronize()
    _assert_matches(inputs, outputs)
    _assert_matches(other_inputs, other_outputs)


@pytest.mark.gpu
def test_two_threads_on_two_streams():
    draws = {t: [_draw(1, 131, seed=100 * t + i) for i in range(4)] for t in range(2)}
    results: dict[int, list] = {0: [], 1: []}
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                for inputs in draws[t]:
                    outputs = _outputs(1, 131)
                    ffn_backward.run(*inputs, *outputs)
                    results[t].append(outputs)
            stream.synchronize()
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t in range(2):
        for inputs, outputs in zip(draws[t], results[t]):
            _assert_matches(inputs, outputs)


@pytest.mark.gpu
def test_inside_the_callers_cuda_graph_capture():
    static_inputs, static_outputs = _draw(1, 131, seed=7), _outputs(1, 131)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture, as torch.cuda.graph asks
        ffn_backward.run(*static_inputs, *static_outputs)
    torch.cuda.current_stream().wait_stream(side)
    captured = torch.cuda.CUDAGraph()
    with torch.cuda.graph(captured):
        ffn_backward.run(*static_inputs, *static_outputs)
    for seed in (8, 9):
        fresh = _draw(1, 131, seed)
        for dst, src in zip(static_inputs, fresh):
            if torch.is_tensor(dst):
                dst.copy_(src)
        for out in static_outputs:
            out.fill_(float("nan"))
        captured.replay()
        torch.cuda.synchronize()
        _assert_matches(static_inputs, static_outputs)


@pytest.mark.gpu
def test_a_callers_open_capture_does_not_break_other_calls_of_the_shape():
    """While one thread's capture of a shape is open, another thread runs the same shape eagerly;
    then the capture ends and replays. (Forking onto the shape's private stream inside a caller's
    capture would have drawn that stream into the capture and broken the eager call.)"""
    static_inputs, static_outputs = _draw(1, 131, seed=12), _outputs(1, 131)
    # drawn before the capture: random draws on the GPU while a capture is open trip torch's RNG guard
    other_inputs, other_outputs = _draw(1, 131, seed=13), _outputs(1, 131)
    ffn_backward.run(*static_inputs, *static_outputs)  # warm-up outside the capture: the shape's graph exists
    torch.cuda.synchronize()
    captured, inside, release, errors = torch.cuda.CUDAGraph(), threading.Event(), threading.Event(), []

    def capture() -> None:
        try:
            with torch.cuda.graph(captured, stream=torch.cuda.Stream(), capture_error_mode="thread_local"):
                ffn_backward.run(*static_inputs, *static_outputs)
                inside.set()
                release.wait(timeout=60)
        except BaseException as e:  # reported by the main thread
            errors.append(e)
            inside.set()

    thread = threading.Thread(target=capture)
    thread.start()
    inside.wait(timeout=60)
    try:
        ffn_backward.run(*other_inputs, *other_outputs)
        torch.cuda.current_stream().synchronize()
    finally:
        release.set()
        thread.join()
    assert not errors, errors
    _assert_matches(other_inputs, other_outputs)
    for out in static_outputs:
        out.fill_(float("nan"))
    captured.replay()
    torch.cuda.synchronize()
    _assert_matches(static_inputs, static_outputs)
