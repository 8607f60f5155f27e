import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Sandbox and loopback-server tests spawn real processes; keep the 2-core CI machine responsive.
    pool: "forks",
    // Two workers even on two cores (vitest's default is cores - 1: one): many files wait on processes, sockets and
    // servers they started, which one worker leaves the second core idle for (the whole suite passed under load 9).
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // A throwaway PostgreSQL server for the suites that use one (started only when a selected file does), and one
    // line saying which suites a missing bubblewrap or Chromium skips.
    globalSetup: ["test/support/postgresSetup.ts", "test/support/toolsSetup.ts"]
  }
})
