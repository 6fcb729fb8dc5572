"""One agent's place in its recorded trajectory.

Shared by the three substitutions a replay makes in the live loop — the replay provider plays
the next recorded assistant turn, the replay tools answer its calls as recorded, and the replay
policy appends what the recording has before that turn — so that all three agree on where the
agent is.
"""

from __future__ import annotations

from ...session.records import Rewound, ToolResult, UserPrompt
from ..importers import AssistantStep, RewindStep, ToolStep, Trajectory, UserStep
from ..node import AgentNode


class Cursor:
    """One agent's place in its trajectory, shared by the replay provider, the replay tools and
    the policy: user steps and rewinds are appended at the boundary before the next recorded
    assistant turn, which the provider then plays."""

    def __init__(self, traj: Trajectory):
        self.traj = traj
        self.steps = traj.steps
        self.i = 1  # steps[0] is the task, the agent's first prompt
        self.step_turn: dict[int, int] = {}
        self.served: int | None = None  # the step the provider played last
        self.results: dict[str, ToolResult] = {
            r.tool_use_id: r for s in traj.steps if isinstance(s, ToolStep) for r in s.results}

    @property
    def task(self) -> str:
        first = self.steps[0]
        return first.text if isinstance(first, UserStep) else ""

    def has_more(self) -> bool:
        return any(isinstance(s, AssistantStep) for s in self.steps[self.i:])

    def advance(self, node: AgentNode) -> bool:
        """Append what the recording has before its next assistant turn; False at its end."""
        ctx = node.ctx
        if not self.step_turn and ctx.turns:
            self.step_turn[0] = ctx.turns[-1].id
        if self.served is not None:
            self.step_turn[self.served] = ctx.in_hand  # type: ignore[assignment]
            self.served = None
        while self.i < len(self.steps):
            step = self.steps[self.i]
            if isinstance(step, AssistantStep):
                return True
            if isinstance(step, UserStep):
                tid = ctx.next_id()
                node.log.append(UserPrompt(turn=tid, text=step.text))
                self.step_turn[self.i] = tid
            elif isinstance(step, RewindStep):
                to = max([t for s, t in self.step_turn.items() if s <= step.to_step], default=0)
                node.log.append(Rewound(to=to))
            self.i += 1  # a ToolStep was answered by the replay tools when its calls ran
        return False

    def play(self) -> AssistantStep:
        step = self.steps[self.i]
        assert isinstance(step, AssistantStep)
        self.served = self.i
        self.i += 1
        return step
