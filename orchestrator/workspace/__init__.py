"""Workspaces: each agent's files, forked by reference, rewound and resumed with its context
(docs/workspace.md).

- ``store``: the run's snapshot store (git's object store, a private ``GIT_DIR``);
- ``confine``: a model's paths kept inside the workspace at the moment of use, writes atomic;
- ``globs``: glob patterns matched in time bounded by their length;
- ``handle``: one agent's ``Workspace`` — read, write, snapshot, restore, fork, merge;
- ``history``: an agent's snapshots, from its log alone;
- ``life``: a workspace made for a root, forked for a child, reopened from a log;
- ``spec``: ``WorkspaceSpec``, what the settings say a root's workspace is made from;
- ``view``: what the CLI, the service and the page show of a workspace at a turn.

Layering: below the tools (``tools.files`` reads a ``Workspace`` through its context) and the
loop; it imports nothing of them.
"""
