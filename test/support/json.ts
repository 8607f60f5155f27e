/** How deep a JSON value nests (0 for a scalar), for checking parsers' depth limits. */
export const depthOf = (value: unknown): number =>
  Array.isArray(value)
    ? 1 + Math.max(0, ...value.map(depthOf))
    : value !== null && typeof value === "object"
    ? 1 + Math.max(0, ...Object.values(value).map(depthOf))
    : 0
