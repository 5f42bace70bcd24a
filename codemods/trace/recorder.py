"""The hooks `gradfix trace` runs a script under, and what they observe (imports torch).

- A `TorchFunctionMode` sees every torch call from Python: each op's output node is tagged
  (in the node's own `metadata` dict, so nothing is kept alive) with the user's line and the
  step it was made in; an op that reads a tensor whose graph an earlier backward already went
  through is a carried read; in-place ops (`add_`, `x[m] = 0`, `inplace=True`, `out=`) and
  `Tensor.backward` / `torch.autograd.backward` / `torch.autograd.grad` pass through it too.
- `saved_tensors_hooks` wraps every tensor an op saves with its version at that moment. An
  in-place write that changes the version of a saved tensor is recorded with its line as the
  write happens; when backward unpacks that tensor, the hook raises the error PyTorch would
  (hooks turn PyTorch's own version check off), now naming both lines.
- Optimizer step hooks count training steps and stop the script after N of them.
- A line tracer on the user's own files watches the statements `stores` found: a graph
  tensor such a statement stores that is still alive two optimizer steps later is kept. It is
  `sys.settrace`, which holds one tracer per thread: a debugger's or coverage's tracer is
  replaced while the script runs and restored after (`sys.monitoring`, which lets tools share,
  is Python 3.12+).

The user's line of an op is the innermost frame in a user file: under the script's folder,
not in torch, site-packages or gradfix.
"""

from __future__ import annotations

import gc
import itertools
import sys
import sysconfig
import threading
import types
import weakref
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)
from torch.overrides import TorchFunctionMode
from torch.utils.hooks import RemovableHandle

from codemods.trace import loops, stores
from codemods.trace.observations import Kind, Observation, Place

Stack = tuple[Place, ...]  # the user's frames of an op, outermost first

# Keys of gradfix's records in a node's metadata: what op made it (`_NodeInfo`, on op outputs
# only), and which backward last went through it and which one freed it (on every node).
_META, _REACHED, _FREED = "gradfix", "gradfix.reached_by", "gradfix.freed_by"
# On a node a backward went through: the `.detach()` of its tensor that ran after that, its
# result (weakly) and the user's line.
_DETACHED = "gradfix.detached_at"
_GRAPH_WALK_LIMIT = 20_000  # nodes visited per walk: a bound on cost, far above toy graphs
_TWICE = "Trying to backward through the graph a second time"
_INPLACE = (
    "one of the variables needed for gradient computation has been modified by an inplace operation"
)
_ADDITIONS = {"add", "__add__", "__radd__", "__iadd__", "add_"}
_COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<setcomp>", "<dictcomp>"}
_BACKWARDS = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}


class StopTracing(BaseException):
    """Raised from an optimizer step hook once N steps ran: a BaseException, so that the
    script's own `except Exception` does not swallow it."""


@dataclass
class _NodeInfo:
    """What gradfix knows of one graph node (the op output it was made for)."""

    stack: Stack
    boundary: int  # backward passes and optimizer steps completed when it was made
    steps: int  # optimizer steps completed when it was made
    scalar: bool  # the output is one number


@dataclass
class _Backward:
    stack: Stack
    steps: int
    parameter_writes: int  # the recorder's count when it ran
    retains: bool
    roots: tuple[int, ...]  # ids of the root nodes
    # Filled in by `_mark`: whether an earlier backward went through part of this graph, and
    # the stacks of the ops made in an earlier optimizer step than the roots were (a tensor of
    # an earlier step read into this step's graph).
    reached_before: bool = False
    older: frozenset[Stack] = frozenset()
    # The first op of this graph found reading a node an earlier backward freed, and the op
    # that made that node: where this graph takes in the freed one.
    joined: tuple[Stack, Stack] | None = None


@dataclass
class _Write:
    stack: Stack
    parameter_update: bool  # a leaf that requires grad written (an optimizer step, SAM)
    module_class: str | None  # the torch module whose `inplace=True` made the write
    # For a write inside an op (an embedding's renorm): the names that hold the saved tensor
    # at the line that saved it, where the fix clones it; empty for a write of the user's own.
    saver_names: frozenset[str] = frozenset()


class _Saved:
    """A tensor an op saved, its version then, and where: what the pack hook returns."""

    __slots__ = ("__weakref__", "stack", "tensor", "version", "write")

    def __init__(self, tensor: torch.Tensor, stack: Stack) -> None:
        self.tensor = tensor
        self.version = tensor._version
        self.stack = stack
        self.write: _Write | None = None


@dataclass
class _Read:
    """A tensor from an earlier step read into a new graph."""

    place: Place
    tensor_stack: Stack
    reader_stack: Stack
    boundary: int  # when the tensor was made
    freed: bool
    steps_between: int
    scalar: bool
    addition: bool
    loop_carried: bool  # the code that made it ran again before this read
    holders: frozenset[str]  # the reading frame's names and `self.x` that hold the tensor
    repeated: bool  # the same code read it before, in an earlier step than this read
    state: str | None  # `Class.attribute` holding it, for a read the same code repeats
    # For a running sum whose addends no backward went through (a metric of the model's
    # output, not a loss): the line where that output enters the code that sums, and the
    # names holding it there.
    fed: tuple[Place, frozenset[str]] | None = None
    # A `.detach()` of it that ran after a backward went through it, whose result is gone:
    # the detached copy was dropped or bound to a name that is no longer read.
    dropped_detach: Place | None = None
    # For state the same code reads again: the loop inside the step that reads it (a time
    # loop), where the state is reset before each step; None when no such loop runs it.
    reset_at: Place | None = None


@dataclass
class _Store:
    tensor: weakref.ref[torch.Tensor]
    place: Place
    receiver: int | None
    steps: int
    scalar: bool
    holder: str  # the stored name or attribute chain, as written
    in_tail: bool  # made in the tail of the epoch the trace stops after


@dataclass
class Recorder:
    roots: tuple[Path, ...]  # folders whose files are the user's
    stop_after: int  # optimizer steps; 0: never stop
    observations: list[Observation] = field(default_factory=list)
    boundary: int = 0
    steps: int = 0
    _optimizer_steps: dict[int, int] = field(default_factory=dict)
    _in_step: int = 0
    _user_files: dict[str, bool] = field(default_factory=dict)
    _store_sites: dict[str, dict[int, stores.StoreSite]] = field(default_factory=dict)
    _site_boundary: dict[Stack, int] = field(default_factory=dict)
    # Frames whose store statement computed its value: its line and site, read once it ran.
    _after: dict[int, tuple[int, stores.StoreSite]] = field(default_factory=dict)
    _saved: dict[int, list[weakref.ref[_Saved]]] = field(default_factory=dict)
    _stack_now: Stack = ()
    _reads: dict[tuple[Place, Stack], _Read] = field(default_factory=dict)
    # Op sites that read, within one step, a tensor they made in that step (a time loop).
    _recurrent: set[Stack] = field(default_factory=set)
    _stores: list[_Store] = field(default_factory=list)
    _kept: set[Place] = field(default_factory=set)
    _seen: set[tuple[str, Place, str]] = field(default_factory=set)
    # Whether the error the script raised (second backward, in-place) was traced to its
    # cause; when not, the runner reports it where it was raised.
    explained_error: bool = False
    parameter_writes: int = 0  # in-place writes to leaves that require grad (any update)
    _running: _Backward | None = None  # the backward running now
    _last_backward: Stack = ()  # the stack of the last backward that ran
    _loops: dict[str, dict[int, list[loops.Loop]]] = field(default_factory=dict)
    # The epoch's batch loop the steps run in, once N steps ran ((frame id, loop); () for
    # none), the step count when its tail started, and whether the tail runs now.
    _epoch: tuple[int, loops.Loop] | tuple[()] | None = None
    _tail_step: int | None = None
    _in_tail: bool = False
    # Its root nodes, held only while it runs (a `_Backward` is kept in node metadata).
    _running_roots: list[Any] = field(default_factory=list)

    # -- installing ---------------------------------------------------------------------------
    @contextmanager
    def installed(self) -> Iterator[None]:
        handles: list[RemovableHandle] = [
            register_optimizer_step_pre_hook(self._before_step),
            register_optimizer_step_post_hook(self._after_step),
        ]
        previous_trace = sys.gettrace()
        with ExitStack() as stack:
            stack.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack))
            stack.enter_context(_Mode(self))
            sys.settrace(self._trace_call)
            threading.settrace(self._trace_call)
            try:
                yield
            finally:
                sys.settrace(previous_trace)
                threading.settrace(previous_trace)  # type: ignore[arg-type]
                for handle in handles:
                    handle.remove()

    def finish(self) -> None:
        """At the end of the run: the carried reads become findings."""
        self._check_kept()
        for read in self._reads.values():
            self._judge_read(read)

    # -- the user's code ----------------------------------------------------------------------
    def is_user(self, filename: str) -> bool:
        """Whether `filename` is the user's code (under the script's folder, not a library)."""
        known = self._user_files.get(filename)
        if known is None:
            known = _under_roots(filename, self.roots)
            self._user_files[filename] = known
        return known

    def _frames(self, start: FrameType | None) -> list[FrameType]:
        """The user's frames from `start` outwards, innermost first."""
        frames = []
        frame = start
        while frame is not None:
            if self.is_user(frame.f_code.co_filename):
                frames.append(frame)
            frame = frame.f_back
        return frames

    @staticmethod
    def _stack_of(frames: list[FrameType]) -> Stack:
        return tuple(Place(f.f_code.co_filename, f.f_lineno) for f in reversed(frames))

    # -- ops -----------------------------------------------------------------------------------
    def on_op(self, func: Callable, args: tuple, kwargs: dict) -> Any:
        frames = self._frames(sys._getframe(2))
        stack = self._stack_of(frames)
        if func in _BACKWARDS:
            return self._backward(func, args, kwargs, stack)
        self._stack_now = stack
        # The inputs' nodes before the call: an in-place op gives its tensor a new one.
        # Under no_grad an op builds no graph (and reading `grad_fn` of a view made there and
        # written in place raises).
        graph = bool(stack) and torch.is_grad_enabled()
        inputs = [(t, t.grad_fn) for t in _tensors((args, kwargs))] if graph else []
        result = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if stack:
            if name == "detach":
                _note_detach(args, result, stack)
            ran_before = self._site_boundary.get(stack, -1)
            self._site_boundary[stack] = self.boundary
            if graph:
                self._tag_outputs(result, inputs, stack, frames, name, ran_before)
            written = _written(name, args, kwargs)
            if written:
                self._on_writes(written, stack, _inplace_module(sys._getframe(2)))
            renormalised = _renormalised(func, args, kwargs)
            if renormalised is not None:
                self._on_writes([renormalised], stack, None, frames)
        return result

    def _tag_outputs(
        self,
        result: Any,
        inputs: list[tuple[torch.Tensor, Any]],
        stack: Stack,
        frames: list[FrameType],
        name: str,
        ran_before: int,
    ) -> None:
        """Tag the outputs' nodes; judge each input made before the last boundary. `ran_before`:
        the boundary at which this op's code last ran before now, -1 never."""
        outputs = [t for t in _tensors(result) if t.grad_fn is not None]
        if not outputs:
            return
        for output in outputs:
            metadata = output.grad_fn.metadata
            if _META not in metadata:
                metadata[_META] = _NodeInfo(stack, self.boundary, self.steps, output.numel() == 1)
        for tensor, node in inputs:
            if node is None:
                continue
            info = node.metadata.get(_META)
            if info is None:
                continue
            if info.boundary == self.boundary:
                if info.stack == stack:  # reads what it made in this step: a recurrence
                    self._recurrent.add(stack)
                continue
            self._on_old_read(tensor, node, info, stack, frames, name, ran_before)

    def _on_old_read(
        self,
        tensor: torch.Tensor,
        node: Any,
        info: _NodeInfo,
        stack: Stack,
        frames: list[FrameType],
        name: str,
        ran_before: int,
    ) -> None:
        reached, freed = _reached(node)
        if not reached:
            return
        place, holders = _reading_place(tensor, frames)
        key = (place, info.stack)
        if key in self._reads:
            return
        # The same code read it before, after it was made, and reads it again past a
        # boundary: state that an object keeps from one step to the next (an RNN decoder's
        # state, a spiking neuron's membrane), when an object's attribute holds it.
        repeated = info.boundary <= ran_before < self.boundary
        self._reads[key] = _Read(
            place=place,
            tensor_stack=info.stack,
            reader_stack=stack,
            boundary=info.boundary,
            freed=freed,
            steps_between=self.steps - info.steps,
            scalar=tensor.numel() == 1,
            addition=name in _ADDITIONS,
            loop_carried=self._loop_carried(info.stack, stack, info.boundary),
            holders=holders,
            repeated=repeated,
            state=_attribute_holding(tensor) if repeated else None,
            fed=_fed_from(node, info, frames) if name in _ADDITIONS else None,
            dropped_detach=_dropped_detach(node),
            reset_at=self._time_loop(frames) if repeated else None,
        )

    def _time_loop(self, frames: list[FrameType]) -> Place | None:
        """Where the loop that reads a state within one step starts: outermost first, the
        first user frame running in a loop that does not also run the last backward (a
        training loop), or in a comprehension (the statement it is in)."""
        outward = list(reversed(frames))
        stack = self._stack_of(frames)
        backward = self._last_backward
        for index, frame in enumerate(outward):
            code, path = frame.f_code, frame.f_code.co_filename
            if code.co_name in _COMPREHENSIONS:
                return stack[index - 1] if index else stack[index]
            loop = loops.innermost(self._loops_of(frame), frame.f_lineno)
            if loop is None:
                continue
            trains = (
                len(backward) > index
                and backward[:index] == stack[:index]
                and backward[index].path == path
                and loop.start <= backward[index].line <= loop.end
            )
            if not trains:
                return Place(path, loop.start)
        return None

    def _loops_of(self, frame: FrameType) -> list[loops.Loop]:
        """The loops of the function `frame` runs."""
        path = frame.f_code.co_filename
        by_function = self._loops.get(path)
        if by_function is None:
            try:
                by_function = loops.loops_by_function(Path(path).read_bytes())
            except OSError:
                by_function = {}
            self._loops[path] = by_function
        code = frame.f_code
        return by_function.get(0 if code.co_name == "<module>" else code.co_firstlineno, [])

    def _loop_carried(self, tensor_stack: Stack, reader_stack: Stack, boundary: int) -> bool:
        """Whether the code that made the tensor ran again after it was made, past a backward
        or a step: a value carried from one iteration of a loop to the next."""
        return tensor_stack == reader_stack or self._site_boundary.get(tensor_stack, -1) > boundary

    def _judge_read(self, read: _Read) -> None:
        if not read.loop_carried:
            return  # the same iteration's graph, reused: GF003 when a backward fails on it
        if not read.freed and read.steps_between == 0:
            return  # a retained graph and no step between: backpropagation through time
        if read.fed is not None:
            self._on_fed(read, *read.fed)
            return
        if read.place in self._kept:
            return
        rule = "GF001" if read.addition and read.scalar else "GF002"
        detached = self._rebinding_detach(read) if rule == "GF002" else None
        if detached is not None:
            message = (
                f"Observed at run time: the tensor made at {_innermost(read.tensor_stack)} in "
                f"one training step is read at {read.place} into the graph of a later step; "
                "the `.detach()` here ran on it after a backward went through it, but its "
                "result only rebinds a name (or is dropped), so what the later step reads is "
                "still attached. Assign the detached tensor to what is read next step."
            )
            self._observe(Observation(rule, Kind.CARRIED, detached, message))
            return
        made = _innermost(read.tensor_stack)
        what = (
            "its graph was freed by that backward, so the next backward through it fails"
            if read.freed
            else "the next backward goes back through every earlier step's graph"
        )
        facts = {f"holder:{code}" for code in read.holders}
        within = rule == "GF002" and self._recurs_here(read)
        place = (read.reset_at or read.place) if within else read.place
        message = (
            f"Observed at run time: a tensor made at {made} in one training step is read "
            f"{'here' if place == read.place else f'at {read.place}'} into the graph of a "
            f"later step, after a backward went through it (backward through history): "
            f"{what}, and each step's graph stays alive. "
        )
        if within:
            # `.detach()` on this read would also cut the graph between the steps of the
            # recurrence inside one training step, and change the gradients.
            message += (
                "That line also reads, within one step, what it made in that step: detach "
                "(or reset) the state where a training step starts, "
                + ("before this loop." if place != read.place else "not here.")
            )
            facts.add("within-step")
        else:
            message += "Detach it where it is carried into the next step."
        self._observe(Observation(rule, Kind.CARRIED, place, message, frozenset(facts)))

    def _on_fed(self, read: _Read, place: Place, holders: frozenset[str]) -> None:
        """GF002 where the model's output enters a running sum of values computed from it."""
        message = (
            f"Observed at run time: the running sum at {read.place} adds, in each training "
            "step, a value computed from the model's output passed here, and keeps it with its "
            "graph across steps (no backward goes through the sum: it is no loss, a metric). "
            "Pass the output detached here."
        )
        facts = frozenset(f"holder:{code}" for code in holders)
        # The sum, kept, is the symptom: the fix goes where the output enters it.
        self.observations = [
            o for o in self.observations if not (o.kind is Kind.KEPT and o.place == read.place)
        ]
        self._observe(Observation("GF002", Kind.CARRIED, place, message, facts))

    def _recurs_here(self, read: _Read) -> bool:
        """Whether the read's own line is a recurrence inside a step (not a caller that
        passes the state in once per step)."""
        return read.reader_stack in self._recurrent and read.place == _innermost(read.reader_stack)

    # -- writes --------------------------------------------------------------------------------
    def _on_writes(
        self,
        written: list[torch.Tensor],
        stack: Stack,
        module_class: str | None,
        op_frames: list[FrameType] | None = None,
    ) -> None:
        """Record, on each saved tensor these writes changed, where it was written. With
        `op_frames` (the user's frames of the op), the write is one an op makes inside itself
        as part of the forward (an embedding lookup renormalising its weight): no update, and
        the saved tensor's names at the op that saved it are kept for the fix there."""
        for tensor in written:
            parameter = _is_parameter(tensor) and op_frames is None
            if parameter:
                self.parameter_writes += 1
            records = self._saved.get(_storage(tensor))
            if not records:
                continue
            alive = []
            for reference in records:
                record = reference()
                if record is None:
                    continue
                alive.append(reference)
                if record.write is None and record.tensor._version != record.version:
                    update = parameter or (self._in_step > 0 and op_frames is None)
                    saver_names = (
                        _names_at(record.tensor, _innermost(record.stack), op_frames)
                        if op_frames is not None
                        else frozenset()
                    )
                    record.write = _Write(stack, update, module_class, saver_names)
            self._saved[_storage(tensor)] = alive

    def _pack(self, tensor: torch.Tensor) -> _Saved:
        record = _Saved(tensor, self._stack_now)
        key = _storage(tensor)
        if key:
            self._saved.setdefault(key, []).append(weakref.ref(record))
        return record

    def _unpack(self, record: _Saved) -> torch.Tensor:
        tensor = record.tensor
        if tensor._version != record.version:
            self._on_modified(record)
            raise RuntimeError(
                f"{_INPLACE}: [{tensor.type()} {list(tensor.shape)}] is at version "
                f"{tensor._version}; expected version {record.version} instead "
                "(reported by gradfix trace)."
            )
        return tensor

    def _on_modified(self, record: _Saved) -> None:
        saved_at = _innermost(record.stack)
        write = record.write
        if write is None:
            return  # written where gradfix cannot see (through `.data`, or untraced code)
        if write.parameter_update:
            if any(r.loop_carried for r in self._reads.values()):
                self.explained_error = True
                return  # a carried graph met the updated weights: the carried read says so
            if self._on_updated_before_backward(record, write):
                return
            message = (
                f"Observed at run time: this parameter update changes a weight that the graph "
                f"saved at {saved_at} still needs, and a later backward goes through that "
                "graph (its first backward retained it): PyTorch raises 'modified by an "
                "inplace operation' (pytorch/pytorch#39141). retain_graph=True is no fix: move "
                "the step after the last backward, or recompute the second loss after the "
                "step."
            )
            place = _innermost(write.stack)  # the step's call, or the update's own line
            self._observe(Observation("GF003", Kind.STEP_BETWEEN, place, message, raised=True))
            return
        if write.saver_names:
            written_at = _innermost(write.stack)
            message = (
                f"Observed at run time: the lookup at {written_at} renormalises, in place, a "
                "weight (`max_norm`) that the op here saved for backward; backward raises "
                "'modified by an inplace operation'. Use a clone of the weight here (the "
                "nn.Embedding documentation's fix): gradients still reach the weight."
            )
            facts = frozenset(f"clone:{name}" for name in write.saver_names)
            self._observe(Observation("GF004", Kind.INPLACE, saved_at, message, facts, raised=True))
            return
        for written in (record, *self._other_writes(record)):
            self._on_inplace(written)

    def _on_inplace(self, record: _Saved) -> None:
        """GF004 at the user's in-place write that changed a tensor `record` saved."""
        assert record.write is not None
        message = (
            f"Observed at run time: this in-place write changes a tensor that the op at "
            f"{_innermost(record.stack)} saved for backward; backward raises 'modified by an "
            "inplace operation'. Compute it out of place, or clone the tensor before the write."
        )
        module_class = record.write.module_class
        place = _innermost(record.write.stack)
        facts = frozenset({f"module:{module_class}"} if module_class else ())
        self._observe(Observation("GF004", Kind.INPLACE, place, message, facts, raised=True))

    def _other_writes(self, failing: _Saved) -> list[_Saved]:
        """The other tensors the failing backward's graph saved that the user's own in-place
        writes changed: backward stops at the first one it unpacks, and a fix of that write
        alone would fail on the next (two `x /= norm` lines in a row)."""
        graph = _graph_stacks(self._running_roots)
        others = []
        for references in self._saved.values():
            for reference in references:
                record = reference()
                if (
                    record is not None
                    and record is not failing
                    and record.write is not None
                    and not record.write.parameter_update
                    and not record.write.saver_names
                    and record.tensor._version != record.version
                    and record.stack in graph
                ):
                    others.append(record)
        return others

    def _on_updated_before_backward(self, record: _Saved, write: _Write) -> bool:
        """An optimizer step changed a weight saved by a graph that no earlier backward went
        through: the graph was built before the step, for this step's backward (GF004: build
        it after the step), or it is a tensor of an earlier step read into this step's graph
        (GF002: make it again in this step), read by code that read it in an earlier step too
        (a loop that reuses it). False when it is neither (GF003: a retained
        graph backpropagated again after a step)."""
        running = self._running
        if running is None:
            return False
        saved_at = _innermost(record.stack)
        stepped_at = _diverging(write.stack, record.stack)
        backward_at = _diverging(running.stack, write.stack)
        carried = [
            r
            for r in self._reads.values()
            if r.repeated and r.tensor_stack in running.older and r.steps_between and not r.freed
        ]
        if carried:
            read = carried[0]
            made = _diverging(read.tensor_stack, read.reader_stack)
            message = (
                f"Observed at run time: the tensor made at {made} in an earlier training step "
                f"is read here into this step's graph; the optimizer step at {stepped_at} has "
                f"since changed a weight its graph saved at {saved_at}, so the backward at "
                f"{backward_at} raises 'modified by an inplace operation'. "
                "retain_graph=True is no fix, and `.detach()` here would stop the gradient "
                "this backward needs: make the tensor again in this step (a fresh forward with "
                "the current weights)."
            )
            self._observe(
                Observation("GF002", Kind.UPDATED_AFTER_READ, read.place, message, raised=True)
            )
            return True
        if running.reached_before:
            return False
        place = _diverging(record.stack, write.stack)
        message = (
            f"Observed at run time: the graph built here saves a weight (at {saved_at}) that "
            f"the optimizer step at {stepped_at} changes in place before the backward at "
            f"{backward_at} goes through it: PyTorch raises 'modified by an "
            "inplace operation'. Build this graph after that step (move this line below it), "
            "or step only after every backward that needs the old weights."
        )
        self._observe(Observation("GF004", Kind.STEP_BEFORE_BACKWARD, place, message, raised=True))
        return True

    # -- backward ------------------------------------------------------------------------------
    def _backward(self, func: Callable, args: tuple, kwargs: dict, stack: Stack) -> Any:
        roots, retains = _backward_arguments(func, args, kwargs)
        root_nodes = [root.grad_fn for root in roots if root.grad_fn is not None]
        roots_ids = tuple(id(n) for n in root_nodes)
        this = _Backward(stack, self.steps, self.parameter_writes, retains, roots_ids)
        self._last_backward = stack
        earlier = _mark(root_nodes, this)
        outer, self._running = self._running, this
        outer_roots, self._running_roots = self._running_roots, root_nodes
        try:
            result = func(*args, **kwargs)
        except RuntimeError as error:
            if _TWICE in str(error) and earlier is not None:
                self._on_freed(this, earlier, root_nodes)
            raise
        finally:
            self._running, self._running_roots = outer, outer_roots
        self.boundary += 1
        return result

    def _on_freed(self, this: _Backward, earlier: _Backward, root_nodes: list[Any]) -> None:
        here = _innermost(this.stack)
        there = _innermost(earlier.stack)
        if any(r.loop_carried and r.freed for r in self._reads.values()):
            self.explained_error = True
            return  # a graph carried across steps: the carried read is the finding
        if set(this.roots) & set(earlier.roots):
            # Where the two calls part: a wrapper's `loss.backward()` is one line for both.
            again = _diverging(this.stack, earlier.stack)
            message = (
                f"Observed at run time: this backward runs again over the loss the backward "
                f"at {_diverging(earlier.stack, this.stack)} already backpropagated, whose "
                f"graph it freed: PyTorch raises '{_TWICE}'. retain_graph=True would only add "
                "the same gradients twice: restructure so that each loss is backpropagated "
                "once (remove the duplicate backward)."
            )
            self._observe(Observation("GF003", Kind.DUPLICATE, again, message, raised=True))
            return
        # Only a step or an update between the two backward passes makes retain_graph=True
        # no fix (a tensor made before an earlier step proves nothing about these two).
        updated = this.parameter_writes != earlier.parameter_writes
        if this.steps != earlier.steps or updated:
            reused = [
                r
                for r in self._reads.values()
                if r.freed and r.steps_between and not r.loop_carried
            ]
            state = next((r for r in reused if r.state is not None), None)
            if state is not None:
                self._on_state_kept(state, earlier)
                return
            read = reused[0] if reused else None
            place, made = here, there
            if read is not None:
                place, made = read.place, _innermost(read.tensor_stack)
            elif this.joined is not None:
                place, made = _innermost(this.joined[0]), _innermost(this.joined[1])
            message = (
                f"Observed at run time: the backward at {there} freed the graph of the tensor "
                f"made at {made}, and this line reads it into the graph of the backward at "
                f"{here}, with an optimizer step or a parameter update between the two "
                f"backward passes: PyTorch raises '{_TWICE}'. retain_graph=True would "
                "only turn this into 'modified by an inplace operation' (the step changed "
                "the weights the graph saved): recompute it after the step (in a GAN, "
                "`D(fake.detach())`; with SAM, a fresh forward)."
            )
            self._observe(Observation("GF003", Kind.REUSED_AFTER_STEP, place, message, raised=True))
            return
        message = (
            f"Observed at run time: this backward frees the graph that the backward at {here} "
            f"goes through again, which raises '{_TWICE}'. Pass `retain_graph=True` here "
            "(or backpropagate the sum of both losses once)."
        )
        facts = frozenset({"repeated"}) if here == there else frozenset()
        self._observe(Observation("GF003", Kind.FREED, there, message, facts, raised=True))

    def _on_state_kept(self, read: _Read, earlier: _Backward) -> None:
        made = _innermost(read.tensor_stack)
        detached = self._rebinding_detach(read)
        if detached is not None:
            message = (
                f"Observed at run time: the tensor made at {made} in one training step is kept "
                f"in an object's state (`{read.state}`) and read at {read.place} in the next "
                f"step; the `.detach()` here ran on it after the backward at "
                f"{_innermost(earlier.stack)}, but its result only rebinds a name (or is "
                "dropped): the state still holds the attached tensor, so the next backward "
                f"raises '{_TWICE}'. Assign the detached tensor back to the attribute that "
                "keeps it."
            )
            self._observe(Observation("GF002", Kind.STATE_KEPT, detached, message, raised=True))
            return
        where = (
            "read here again in the next step"
            if read.reset_at is None
            else f"read at {read.place} again in the next step, by this loop inside the step"
        )
        reset = (
            "Reset the state at the start of each batch"
            if read.reset_at is None
            else "Reset the state before this loop starts (once per training step)"
        )
        message = (
            f"Observed at run time: the tensor made at {made} in one training step is kept in "
            f"an object's state (`{read.state}`) and {where}; the backward at "
            f"{_innermost(earlier.stack)} freed its graph, so the next backward raises "
            f"'{_TWICE}'. {reset}, or detach it where one step ends (restructure by hand: "
            "which one the model means, and where its steps end, gradfix cannot tell)."
        )
        place = read.reset_at or read.place
        self._observe(Observation("GF002", Kind.STATE_KEPT, place, message, raised=True))

    def _rebinding_detach(self, read: _Read) -> Place | None:
        """The line of a `.detach()` that ran on the read tensor after its step and only
        rebound a name, in the read's own file (where the fix goes instead of the read)."""
        place = read.dropped_detach
        if place is None or place.path != read.place.path:
            return None
        try:
            source = Path(place.path).read_bytes()
        except OSError:
            return None
        return place if stores.detach_rebinds_name(source, place.line) else None

    # -- optimizer steps -----------------------------------------------------------------------
    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._in_step += 1

    def _after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._in_step -= 1
        count = self._optimizer_steps.get(id(optimizer), 0) + 1
        self._optimizer_steps[id(optimizer)] = count
        self.boundary += 1
        if count > self.steps:
            self.steps = count
            stopping = bool(self.stop_after) and self.steps >= self.stop_after and self._may_stop()
            self._check_kept(tail_due=stopping)
            if stopping:
                raise StopTracing

    def _may_stop(self) -> bool:
        """Whether the run may stop now that N steps ran. When the step runs in an epoch's
        batch loop (a loop with more statements after it in an outer loop's body: validation,
        logging), the run goes on to the first step after that tail ran, so that what the
        epoch's end stores is watched too; never past N + max(1, N // 3) steps."""
        if self.steps >= self.stop_after + max(1, self.stop_after // 3):
            return True
        if self._epoch is None:
            self._epoch = self._epoch_loop(sys._getframe(2))
            return self._epoch == ()
        return self._tail_step is not None and self.steps > self._tail_step

    def _epoch_loop(self, start: FrameType) -> tuple[int, loops.Loop] | tuple[()]:
        """The innermost user loop around the step call, as (frame id, loop), when it is an
        epoch's batch loop; its frame's lines are then watched for the tail. () otherwise."""
        for frame in self._frames(start):
            loop = loops.innermost(self._loops_of(frame), frame.f_lineno)
            if loop is None:
                continue
            if loop.tail is None:
                return ()
            if frame.f_trace is None:
                frame.f_trace = self._trace_line
            return id(frame), loop
        return ()

    # -- kept tensors ----------------------------------------------------------------------
    def _trace_call(self, frame: FrameType, event: str, arg: Any) -> Callable | None:
        if event != "call" or not self.is_user(frame.f_code.co_filename):
            return None
        if not self._sites_of(frame.f_code.co_filename):
            return None
        return self._trace_line

    def _trace_line(self, frame: FrameType, event: str, arg: Any) -> Callable | None:
        if self._epoch and event == "line" and id(frame) == self._epoch[0]:
            loop = self._epoch[1]
            in_loop = loop.start <= frame.f_lineno <= loop.end
            if self._tail_step is None and not in_loop:
                self._tail_step = self.steps  # the batch loop is done: the epoch's tail runs
                self._in_tail = True
            elif self._in_tail and in_loop:
                self._in_tail = False  # the next epoch's batch loop
        pending = self._after.get(id(frame))
        if pending is not None and (
            event != "line" or not pending[0] <= frame.f_lineno <= pending[1].end_line
        ):
            del self._after[id(frame)]
            if event != "exception":  # a store that raised stored nothing
                self._on_stored(frame, pending[1], Place(frame.f_code.co_filename, pending[0]))
        if event == "line" and frame.f_code.co_name != "forward":
            # a forward's lists are its outputs: kept only if its caller keeps them
            site = self._store_sites[frame.f_code.co_filename].get(frame.f_lineno)
            if site is not None:
                self._on_store(frame, site)
                if site.result is not None:
                    self._after[id(frame)] = (frame.f_lineno, site)
        return self._trace_line

    def _sites_of(self, filename: str) -> dict[int, stores.StoreSite]:
        sites = self._store_sites.get(filename)
        if sites is None:
            try:
                source = Path(filename).read_bytes()
            except OSError:
                source = b""
            sites = stores.store_sites(source)
            self._store_sites[filename] = sites
        return sites

    def _on_store(self, frame: FrameType, site: stores.StoreSite) -> None:
        """Before a store statement runs: the values it stores, read from their names."""
        receiver = stores.read(frame, site.receiver) if site.receiver else None
        place = Place(frame.f_code.co_filename, frame.f_lineno)
        for path in site.operands:
            # only a tensor stored as itself can take `.detach()` where stored
            self._record_stores(stores.read(frame, path), place, receiver, ".".join(path))

    def _on_stored(self, frame: FrameType, site: stores.StoreSite, place: Place) -> None:
        """After a store statement that computed its value ran: that value, where it went."""
        assert site.result is not None
        value = stores.read(frame, site.result)
        # An attribute the statement assigns or adds into (`self.sum += f(x)`) holds the
        # value: it names it for the fix; a list's last item or a dict's entry has no name.
        holder = ".".join(site.result)
        if site.appended:
            value = value[-1] if isinstance(value, list) and value else None
            holder = ""
        elif site.key is not None:
            value = stores.item(value, site.key)
            holder = ""
        receiver = stores.read(frame, site.receiver) if site.receiver else None
        self._record_stores(value, place, receiver, holder)

    def _record_stores(self, value: Any, place: Place, receiver: Any, holder: str) -> None:
        for tensor in _tensors(value):
            if tensor.grad_fn is None:
                continue
            self._stores.append(
                _Store(
                    weakref.ref(tensor),
                    place,
                    None if receiver is None else id(receiver),
                    self.steps,
                    tensor.numel() == 1,
                    holder if value is tensor else "",
                    self._in_tail,
                )
            )

    def _check_kept(self, tail_due: bool = False) -> None:
        """Tensors stored two optimizer steps ago and still alive: kept, with their graph,
        beyond the step that made them (one step is not enough: the last step's values are
        still bound to the loop's names). With `tail_due`, as the trace stops, also those an
        epoch's tail stored, once the next epoch's batch loop runs: no batch's names hold them."""
        horizon = self.steps - 2
        tail_over = tail_due and not self._in_tail

        def is_due(store: _Store) -> bool:
            return store.steps <= horizon or (tail_over and store.in_tail)

        due = [s for s in self._stores if is_due(s)]
        if not due:
            return
        self._stores = [s for s in self._stores if not is_due(s)]
        by_tensor: dict[int, list[_Store]] = {}
        tensors: dict[int, torch.Tensor] = {}
        for store in due:
            tensor = store.tensor()
            if tensor is None or store.place in self._kept:
                continue
            by_tensor.setdefault(id(tensor), []).append(store)
            tensors[id(tensor)] = tensor
        places: dict[Place, list[_Store]] = {}
        for key, candidates in by_tensor.items():
            holders = _holders(tensors[key])
            # Only the statement that stored it into what still holds it (not a list the
            # forward builds and drops, whose tensors something else keeps).
            matching = [s for s in candidates if s.receiver in holders]
            for store in matching:
                places.setdefault(store.place, []).append(store)
        for place, kept in places.items():
            self._kept.add(place)
            # A loss is one number; a store that keeps any larger tensor keeps outputs.
            scalar = all(s.scalar for s in kept)
            rule = "GF001" if scalar else "GF002"
            message = (
                "Observed at run time: the graph-attached tensor stored here is still alive "
                "two optimizer steps later, and with it its autograd graph (only kept: memory "
                "grows with every step). Store it detached (`.detach()`, or `.item()` for a "
                "number)."
            )
            holders = frozenset(f"holder:{s.holder}" for s in kept if s.holder)
            self._observe(Observation(rule, Kind.KEPT, place, message, holders))

    def _observe(self, observation: Observation) -> None:
        key = (observation.rule, observation.place, observation.kind.value)
        self.explained_error |= observation.raised
        if key not in self._seen:
            self._seen.add(key)
            self.observations.append(observation)


class _Mode(TorchFunctionMode):
    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__name__", "") == "__get__":  # attribute reads: `x.grad_fn`, `x.T`
            return func(*args, **kwargs)
        return self.recorder.on_op(func, args, kwargs)


# -- helpers --------------------------------------------------------------------------------
_LIBRARY_PATHS = tuple(
    {
        str(Path(p).resolve())
        for key in ("purelib", "platlib", "stdlib")
        if (p := sysconfig.get_paths().get(key))
    }
)
_GRADFIX = str(Path(__file__).resolve().parent.parent)


def _under_roots(filename: str, roots: tuple[Path, ...]) -> bool:
    if filename.startswith("<"):
        return False
    resolved = str(Path(filename).resolve())
    if resolved.startswith(_LIBRARY_PATHS) or resolved.startswith(_GRADFIX):
        return False
    return any(resolved.startswith(str(root) + "/") for root in roots)


def _tensors(value: Any, depth: int = 3) -> Iterator[torch.Tensor]:
    """The tensors in `value`: itself, or inside tuples, lists and dicts (a few levels)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif depth and isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors(item, depth - 1)
    elif depth and isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item, depth - 1)


def _storage(tensor: torch.Tensor) -> int:
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


_INPLACE_DUNDERS = {
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
    "__ipow__", "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__setitem__",
}  # fmt: skip


def _written(name: str, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors an op writes in place."""
    written: list[torch.Tensor] = []
    in_place = name in _INPLACE_DUNDERS or (
        name.endswith("_") and not name.startswith("__") and not name.endswith("__")
    )
    if (in_place or kwargs.get("inplace") is True) and args:
        written.extend(_tensors(args[0], depth=1))
    out = kwargs.get("out")
    if out is not None:
        written.extend(_tensors(out, depth=1))
    return written


def _is_parameter(tensor: torch.Tensor) -> bool:
    """A leaf that requires grad, or a view of one (`weight[i]`: `is_leaf` of a view made
    under no_grad and written in place raises)."""
    base = tensor._base if tensor._is_view() else tensor
    return base is not None and base.is_leaf and base.requires_grad


def _renormalised(func: Callable, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The weight an embedding lookup with `max_norm` renormalises in place. The write happens
    inside `F.embedding` (`torch.embedding_renorm_` on a detached alias), below the mode, so
    the lookup itself is the only call gradfix sees."""
    if func is not torch.nn.functional.embedding or _argument(args, kwargs, 3, "max_norm") is None:
        return None
    weight = _argument(args, kwargs, 1, "weight")
    return weight if isinstance(weight, torch.Tensor) else None


def _names_at(tensor: torch.Tensor, place: Place, frames: list[FrameType]) -> frozenset[str]:
    """The source text that reads `tensor` at `place`, from the frame among `frames` that runs
    that line's code: a local name, or a parameter of a module held by a local name or by
    `self` (`embedding.weight`, `self.embed.weight`). Read from `__dict__`s only."""
    frame = next(
        (
            f
            for f in frames
            if f.f_code.co_filename == place.path
            and any(line == place.line for _, _, line in f.f_code.co_lines())
        ),
        None,
    )
    if frame is None:
        return frozenset()
    names: set[str] = set()
    for name, value in frame.f_locals.items():
        if value is tensor:
            names.add(name)
        elif isinstance(value, torch.nn.Module):
            names |= {f"{name}.{path}" for path in _parameter_paths(value, tensor)}
    return frozenset(names)


def _parameter_paths(module: torch.nn.Module, tensor: torch.Tensor) -> Iterator[str]:
    """`weight` or `embed.weight`: where `module` holds `tensor`, itself or one submodule down."""
    for name, parameter in vars(module).get("_parameters", {}).items():
        if parameter is tensor:
            yield name
    for child_name, child in vars(module).get("_modules", {}).items():
        for name, parameter in vars(child).get("_parameters", {}).items() if child else ():
            if parameter is tensor:
                yield f"{child_name}.{name}"


def _inplace_module(frame: FrameType | None) -> str | None:
    """The class of the torch module working in place (`nn.ReLU(inplace=True)`) whose own code
    made the current op, if one did: the first `self` with `inplace` set, in the library frames
    the op was called from."""
    while frame is not None:
        owner = frame.f_locals.get("self")
        if isinstance(owner, torch.nn.Module):
            return type(owner).__name__ if getattr(owner, "inplace", False) is True else None
        frame = frame.f_back
    return None


def _reached(node: Any) -> tuple[bool, bool]:
    """Whether a backward went through `node`'s graph, and whether one freed part of it."""
    reached = freed = False
    stack, seen = [node], {id(node)}
    while stack and len(seen) < _GRAPH_WALK_LIMIT:
        current = stack.pop()
        metadata = current.metadata
        if _REACHED in metadata:
            reached = True
            if _FREED in metadata:
                return True, True
        for child, _ in current.next_functions:
            if child is not None and id(child) not in seen and not _is_leaf_node(child):
                seen.add(id(child))
                stack.append(child)
    return reached, freed


def _is_leaf_node(node: Any) -> bool:
    """A parameter's (or another leaf's) gradient accumulator: shared by every graph that
    uses the leaf, so it says nothing about which step a graph belongs to."""
    return type(node).__name__ == "AccumulateGrad"


def _mark(root_nodes: list[Any], backward: _Backward) -> _Backward | None:
    """Mark the nodes `backward` goes through, noting on it what `_mark` fills in; the
    earlier backward that freed one of them, if any."""
    earlier = None
    made = [m.steps for n in root_nodes if (m := n.metadata.get(_META)) is not None]
    roots_steps = min(made) if made else None
    older: set[Stack] = set()
    # Each node with the tagged op above it (the nearest one on the way down).
    stack: list[tuple[Any, _NodeInfo | None]] = [(n, None) for n in root_nodes]
    seen = {id(n) for n in root_nodes}
    while stack and len(seen) < _GRAPH_WALK_LIMIT:
        current, above = stack.pop()
        metadata = current.metadata
        info = metadata.get(_META)
        freed_by = metadata.get(_FREED)
        if freed_by is not None and earlier is None:
            earlier = freed_by
            if above is not None and info is not None:
                backward.joined = (above.stack, info.stack)
        if _REACHED in metadata:
            backward.reached_before = True
        if info is not None and roots_steps is not None and info.steps < roots_steps:
            older.add(info.stack)
        metadata[_REACHED] = backward
        if not backward.retains and freed_by is None:
            metadata[_FREED] = backward
        for child, _ in current.next_functions:
            if child is not None and id(child) not in seen and not _is_leaf_node(child):
                seen.add(id(child))
                stack.append((child, info or above))
    backward.older = frozenset(older)
    return earlier


def _graph_stacks(root_nodes: list[Any]) -> set[Stack]:
    """The stacks of the ops whose nodes the graph under `root_nodes` holds."""
    stacks: set[Stack] = set()
    stack, seen = list(root_nodes), {id(n) for n in root_nodes}
    while stack and len(seen) < _GRAPH_WALK_LIMIT:
        current = stack.pop()
        info = current.metadata.get(_META)
        if info is not None:
            stacks.add(info.stack)
        for child, _ in current.next_functions:
            if child is not None and id(child) not in seen and not _is_leaf_node(child):
                seen.add(id(child))
                stack.append(child)
    return stacks


def _backward_arguments(
    func: Callable, args: tuple, kwargs: dict
) -> tuple[list[torch.Tensor], bool]:
    """The tensors a backward call differentiates, and whether it keeps their graph."""
    if func is torch.Tensor.backward:
        roots = list(_tensors(args[0], depth=0)) if args else []
        retain, create = (
            _argument(args, kwargs, 2, "retain_graph"),
            _argument(args, kwargs, 3, "create_graph"),
        )
    elif func is torch.autograd.backward:
        roots = list(_tensors(_argument(args, kwargs, 0, "tensors")))
        retain, create = (
            _argument(args, kwargs, 2, "retain_graph"),
            _argument(args, kwargs, 3, "create_graph"),
        )
    else:
        roots = list(_tensors(_argument(args, kwargs, 0, "outputs")))
        retain, create = (
            _argument(args, kwargs, 3, "retain_graph"),
            _argument(args, kwargs, 4, "create_graph"),
        )
    retains = bool(retain) if retain is not None else bool(create)
    return roots, retains


def _argument(args: tuple, kwargs: dict, position: int, name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[position] if position < len(args) else None


def _innermost(stack: Stack) -> Place:
    return stack[-1] if stack else Place("<unknown>", 0)


def _diverging(stack: Stack, other: Stack) -> Place:
    """The frame of `stack` where it leaves `other`'s path: the line, in the function both
    ran in, that led to `stack`'s op (`loss = compute()` when `other` is a later `step()` in
    the same function); the innermost frame when `stack` does not leave it."""
    for place, other_place in zip(stack, other, strict=False):
        if place != other_place:
            return place
    return _innermost(stack)


def _reading_place(tensor: torch.Tensor, frames: list[FrameType]) -> tuple[Place, frozenset[str]]:
    """Where a tensor is read: the innermost user frame, or, while the tensor came in as an
    argument of that frame's function, its caller's line (the fix goes where it is passed);
    and the names and `self` attributes that hold it there."""
    chosen = frames[0] if frames else None
    for frame, caller in itertools.pairwise(frames):
        if not _is_argument(tensor, frame):
            break
        chosen = caller
    if chosen is None:
        return Place("<unknown>", 0), frozenset()
    holders = {name for name, value in chosen.f_locals.items() if value is tensor}
    owner = chosen.f_locals.get("self")
    attributes = getattr(owner, "__dict__", None) if owner is not None else None
    if isinstance(attributes, dict):
        holders |= {f"self.{name}" for name, value in attributes.items() if value is tensor}
    return Place(chosen.f_code.co_filename, chosen.f_lineno), frozenset(holders)


def _note_detach(args: tuple, result: Any, stack: Stack) -> None:
    """Mark a graph tensor's node with the `.detach()` that ran after a backward reached it
    or the nodes just under it (a state made from the step's output: `h.unsqueeze(0)`)."""
    tensor = args[0] if args else None
    node = tensor.grad_fn if isinstance(tensor, torch.Tensor) else None
    if node is None or not isinstance(result, torch.Tensor):
        return
    near = [node, *(child for child, _ in node.next_functions if child is not None)]
    if any(_REACHED in n.metadata for n in near):
        node.metadata[_DETACHED] = (weakref.ref(result), _innermost(stack))


def _dropped_detach(node: Any) -> Place | None:
    detached = node.metadata.get(_DETACHED)
    return detached[1] if detached is not None and detached[0]() is None else None


def _fed_from(
    node: Any, info: _NodeInfo, frames: list[FrameType]
) -> tuple[Place, frozenset[str]] | None:
    """For a running sum `node` (made at `info.stack`) whose addends no backward went through,
    but whose inputs one did, below them, and not as its loss: the model's output, passed into
    the code that sums (a metric). The user's line that binds that output and passes it on,
    with its names there (or the line where it enters that code). None for a sum of losses,
    or of values computed from a loss's terms (one number each: a criterion's dict entries)."""
    # The sum's chain, one node per step back (the same op at the same line), then the addends.
    chain, addends, seen = [node], [], {id(node)}
    while chain and len(seen) < _GRAPH_WALK_LIMIT:
        current = chain.pop()
        for child, _ in current.next_functions:
            if child is None or id(child) in seen or _is_leaf_node(child):
                continue
            seen.add(id(child))
            earlier = child.metadata.get(_META)
            in_chain = (
                earlier is not None
                and earlier.stack == info.stack
                and type(child) is type(node)
                and earlier.boundary < current.metadata[_META].boundary
            )
            (chain if in_chain else addends).append(child)
    if not addends or any(_REACHED in a.metadata for a in addends):
        return None
    live = _first_reached(addends, seen)
    made = None if live is None else live.metadata.get(_META)
    if made is None or made.scalar or id(live) in live.metadata[_REACHED].roots:
        return None  # the loss itself or one of its terms, summed: GF001
    reader = Recorder._stack_of(frames)
    entered = _diverging(reader, made.stack)
    if entered == _innermost(reader):
        return None  # made where it is summed: a loss term, not an output passed on
    # This step's output, made by the same code as the one the sum kept: the name a frame
    # binds it to (not a parameter it came in as).
    for frame in frames:
        code = frame.f_code
        arguments = code.co_argcount + code.co_kwonlyargcount
        arguments += bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)  # *args, **kwargs
        bound = [
            name
            for name in code.co_varnames[arguments:]
            if _made_at(frame.f_locals.get(name)) == made.stack
        ]
        if bound:
            return Place(code.co_filename, frame.f_lineno), frozenset(bound)
    return entered, frozenset()


def _made_at(value: Any) -> Stack | None:
    """The stack of the op that made `value`, for a tensor gradfix tagged."""
    node = value.grad_fn if isinstance(value, torch.Tensor) else None
    info = None if node is None else node.metadata.get(_META)
    return None if info is None else info.stack


def _first_reached(nodes: list[Any], seen: set[int]) -> Any | None:
    """The first node a backward went through, searching down from `nodes`."""
    stack = list(nodes)
    while stack and len(seen) < _GRAPH_WALK_LIMIT:
        current = stack.pop(0)
        if _REACHED in current.metadata:
            return current
        for child, _ in current.next_functions:
            if child is not None and id(child) not in seen and not _is_leaf_node(child):
                seen.add(id(child))
                stack.append(child)
    return None


def _attribute_holding(tensor: torch.Tensor) -> str | None:
    """`Class.attribute` of an object that holds `tensor` as an attribute, itself or in a
    tuple or list (an LSTM's `(h, c)`), if one does; a module's globals are no object's state.
    An instance holds its attributes itself or in its `__dict__`."""
    held_by: list[object] = [tensor]
    held_by += [r for r in gc.get_referrers(tensor) if isinstance(r, (tuple, list))]
    for held in held_by:
        for referrer in gc.get_referrers(held):
            owners = [referrer]
            if isinstance(referrer, dict):
                owners = [o for o in gc.get_referrers(referrer) if _namespace(o) is referrer]
            for owner in owners:
                namespace = _namespace(owner)
                if namespace is None or isinstance(owner, types.ModuleType):
                    continue
                name = next((k for k, v in namespace.items() if v is held), None)
                if name is not None:
                    return f"{type(owner).__name__}.{name}"
    return None


def _namespace(owner: object) -> dict | None:
    """An instance's own attributes (`__dict__`, read without running its code)."""
    if isinstance(owner, (type, dict, list, tuple, types.FrameType)):
        return None
    if not getattr(type(owner), "__dictoffset__", 0):
        return None
    namespace = getattr(owner, "__dict__", None)
    return namespace if isinstance(namespace, dict) else None


def _is_argument(tensor: torch.Tensor, frame: FrameType) -> bool:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:count]
    local = frame.f_locals
    return any(
        any(t is tensor for t in _tensors(local.get(name), depth=2))
        for name in names
        if name != "self"
    )


def _holders(tensor: torch.Tensor) -> set[int]:
    """The ids of what holds `tensor`, and of what holds those, two levels out (an object
    whose `__dict__` holds a list that holds it)."""
    level = [r for r in gc.get_referrers(tensor) if isinstance(r, (list, dict, tuple))]
    ids = {id(r) for r in level}
    for _ in range(2):  # a list in a dict in an object's `__dict__`
        outer = [
            o
            for holder in level
            for o in gc.get_referrers(holder)
            if isinstance(o, (list, dict, tuple)) or hasattr(o, "__dict__")
        ]
        ids |= {id(o) for o in outer}
        level = [o for o in outer if isinstance(o, (list, dict, tuple))]
    return ids
