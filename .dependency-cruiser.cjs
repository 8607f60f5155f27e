// The layers of DESIGN §2: every import points down or sideways, never up, and nothing imports in a circle (type-only
// imports included: a circle of types is still two modules that cannot be understood one without the other).
// Run with `npm run check:layers`.
/** @type {import('dependency-cruiser').IConfiguration} */

// Each layer and the layers below it that it may import (besides itself and effect).
const layers = {
  core: [],
  providers: ["core"],
  environment: ["core"],
  architectures: ["core", "environment"],
  rollouts: ["core", "environment", "architectures"],
  serve: ["core", "providers", "environment", "architectures", "rollouts"],
  cli: ["core", "providers", "environment", "architectures", "rollouts", "serve"]
}

const all = Object.keys(layers)

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      severity: "error",
      comment: "Modules import each other in a circle (DESIGN §2).",
      from: {},
      to: { circular: true }
    },
    ...Object.entries(layers).map(([layer, allowed]) => ({
      name: `layer-${layer}`,
      severity: "error",
      comment: `src/${layer} may import only ${allowed.length === 0 ? "core itself" : allowed.join(", ")} (DESIGN §2).`,
      from: { path: `^src/${layer}/` },
      to: {
        // The layers above (and the root entry point, which re-exports everything).
        path: ["^src/index\\.ts$", ...all.filter((other) => other !== layer && !allowed.includes(other)).map((other) => `^src/${other}/`)]
      }
    })),
    {
      name: "no-unlisted-layer",
      severity: "error",
      comment: "Every module of src/ lives in one of the layers of DESIGN §2 (the entry points excepted).",
      from: { path: "^src/", pathNot: `^src/(${all.join("|")})/|^src/[A-Za-z]+\\.ts$` },
      to: {}
    },
    {
      name: "no-node-modules-in-core",
      severity: "error",
      comment: "Core builds on effect alone (and node's own modules).",
      from: { path: "^src/core/" },
      to: { dependencyTypes: ["npm", "npm-dev", "npm-peer", "npm-optional"], pathNot: "^node_modules/effect/" }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "types", "default"] },
    includeOnly: "^src/"
  }
}
