/** The version `valet --version` prints (and the MCP server reports). */
export const version = "0.1.0"
