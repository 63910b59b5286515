"""MCP tool servers: connect them over stdio or streamable HTTP, use their tools (docs/mcp.md).

Needs the `mcp` extra (`pip install duraloop[mcp]`). `import duraloop.tools` never imports
this package; importing it loads the MCP SDK only when `McpServers` is first used.
"""

from ... import _lazy

if _lazy.TYPE_CHECKING:
    from ._config import McpServerConfig as McpServerConfig
    from ._config import mcp_tool_name as mcp_tool_name
    from ._servers import McpServers as McpServers

__all__ = ["McpServerConfig", "McpServers", "mcp_tool_name"]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "McpServerConfig": "._config",
            "mcp_tool_name": "._config",
            "McpServers": "._servers",
        },
    )
