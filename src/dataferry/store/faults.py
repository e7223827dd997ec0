"""Fault injection: fail or "crash" chosen store operations, before or after they take effect.

Every operation through an armed `FaultStore` gets an index (0, 1, 2, ... in call order) and is
appended to `trace`. A `FaultRule` picks operations by index, kind and path pattern and says
what happens:

- `crash`: raise `InjectedCrash` (a BaseException: the process died here);
- `fail`: raise `InjectedFault` (an ordinary, retriable I/O error);
- `ambiguous`: raise `AmbiguousOutcome` (a timeout whose effect is unknown);
- `deny`: raise `AccessDenied` (an unwritable destination, even when running as root);
- `throttle`: raise `Throttled` (the store's "slow down");
- `kill`: SIGKILL the current process (a driver that really dies: no `finally`, no `atexit`,
  no heartbeat; only ever armed in a child process the harness started for it); `after` an
  operation that raised, it kills too (the process dies whatever the operation returned);
- `callback`: run `rule.callback(index, op, path)` at that point and carry on without raising
  (another actor acts right there: a zombie attempt commits, a second job commits).

`when="before"` means the operation never reached the store; `when="after"` means it took
effect and then the caller saw the failure, the ambiguity every real store has. An `ambiguous`
rule is the store's answer "I cannot tell": before, the request was lost; after, it took effect
(a rename, copy, completed upload, PUT or delete that is done although the caller got a
timeout).

Operations of a background thread (`store/background.py`: a heartbeat, whose renewals come at
times, not at steps of a job) take no index and are not traced: a job's own operations keep
their indexes from run to run however slow the store, so a fault or a pause chosen from one
run's trace lands at the same step of the next. Rules without an index still match them.

Any rule may also carry a `callback` for an action other than `callback`: it runs first, then
the action fires (another actor acted while the caller waited for its answer: e.g. a file of
the same name appears at a rename's destination, then the rename times out). A traced rename
or copy records where it goes (`TracedOp.dest`), so such a callback can act there.
"""

from __future__ import annotations

import fnmatch
import os
import signal
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from ..errors import (
    AccessDenied,
    AmbiguousOutcome,
    ConfigError,
    InjectedCrash,
    InjectedFault,
    Throttled,
)
from .background import is_background_thread
from .base import Store
from .types import Op
from .wrapping import WrappingStore

T = TypeVar("T")

Action = Literal["crash", "fail", "ambiguous", "deny", "throttle", "kill", "callback"]
Callback = Callable[[int, Op, str], None]
When = Literal["before", "after"]


@dataclass
class FaultRule:
    """Which operations to break and how. Unset selectors match everything."""

    action: Action = "crash"
    when: When = "before"
    index: int | None = None
    kinds: frozenset[Op] | None = None
    path_glob: str | None = None
    predicate: Callable[[int, Op, str], bool] | None = None
    times: int = 1  # how many matching operations to break; -1 for all
    fired: int = field(default=0, compare=False)
    # for action "callback" (required); for any other action it runs first (optional)
    callback: Callback | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.action == "callback" and self.callback is None:
            raise ConfigError("a FaultRule with action 'callback' needs a callback")

    def matches(self, index: int, op: Op, path: str) -> bool:
        if self.times >= 0 and self.fired >= self.times:
            return False
        if self.index is not None and index != self.index:
            return False
        if self.kinds is not None and op not in self.kinds:
            return False
        if self.path_glob is not None and not fnmatch.fnmatchcase(path, self.path_glob):
            return False
        return not (self.predicate is not None and not self.predicate(index, op, path))


def crash_at(index: int, when: When = "before") -> FaultRule:
    return FaultRule(action="crash", when=when, index=index)


def kill_at(index: int, when: When = "before") -> FaultRule:
    """SIGKILL this process at operation `index` (arm only in a process meant to die)."""
    return FaultRule(action="kill", when=when, index=index)


def call_at(index: int, callback: Callback, when: When = "before") -> FaultRule:
    """Run `callback(index, op, path)` at operation `index`, then go on with the operation."""
    return FaultRule(action="callback", when=when, index=index, callback=callback)


def ambiguous_at(index: int, when: When = "before", meanwhile: Callback | None = None) -> FaultRule:
    """Answer operation `index` with AmbiguousOutcome: `before` it reached the store (it did
    not happen) or `after` it took effect. `meanwhile(index, op, path)` runs just before the
    answer (another writer acts while the caller waits)."""
    return FaultRule(action="ambiguous", when=when, index=index, callback=meanwhile)


@dataclass(frozen=True)
class TracedOp:
    index: int
    op: Op
    path: str
    dest: str = ""  # where a rename or copy goes ("" for other operations)


class FaultStore(WrappingStore):
    """Wraps a store and breaks the operations its rules select."""

    def __init__(self, inner: Store, rules: Iterable[FaultRule] = ()) -> None:
        super().__init__(inner)
        self.rules: list[FaultRule] = list(rules)
        self.trace: list[TracedOp] = []
        self.armed = True
        self._counter_lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_counter_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._counter_lock = threading.Lock()

    @property
    def op_count(self) -> int:
        return len(self.trace)

    def add_rule(self, rule: FaultRule) -> None:
        self.rules.append(rule)

    def _op(self, op: Op, path: str, fn: Callable[..., T], *args: Any) -> T:
        if not self.armed:  # disarmed: neither traced nor broken (checks, recovery)
            return super()._op(op, path, fn, *args)
        background = is_background_thread()
        with self._counter_lock:
            index = -1 if background else len(self.trace)
            dest = args[1] if op in (Op.RENAME, Op.COPY) and len(args) > 1 else ""
            if not background:
                self.trace.append(TracedOp(index, op, path, dest))
            rule = None
            for r in self.rules:
                if r.matches(index, op, path):
                    r.fired += 1
                    rule = r
                    break
        if rule is not None and rule.when == "before":
            self._fire(rule, index, op, path)
        try:
            result = super()._op(op, path, fn, *args)
        except BaseException:
            if rule is not None and rule.when == "after" and rule.action == "kill":
                self._fire(rule, index, op, path)  # the process dies whether or not it failed
            raise
        if rule is not None and rule.when == "after":
            self._fire(rule, index, op, path)
        return result

    def _fire(self, rule: FaultRule, index: int, op: Op, path: str) -> None:
        self.stats.incr(f"fault_injected_{rule.action}")
        what = f"injected {rule.action} {rule.when} op #{index} {op.value} {path!r}"
        if rule.callback is not None:
            rule.callback(index, op, path)
        if rule.action == "callback":
            return
        if rule.action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if rule.action == "crash":
            raise InjectedCrash(what, index)
        if rule.action == "ambiguous":
            raise AmbiguousOutcome(what, path)
        if rule.action == "deny":
            raise AccessDenied(f"permission denied ({what})", path)
        if rule.action == "throttle":
            raise Throttled(what, path)
        raise InjectedFault(what, path)
