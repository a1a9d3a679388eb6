"""The surfaces (doors) onto a project: the ``synthex`` CLI, the MCP server, the SQL console, the UI
launcher. Each resolves one ``ProjectApp`` (and through it one scope) per command and asks it; none
reaches below the application layer for memory."""
