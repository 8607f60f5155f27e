/**
 * A temporary directory for a test's files, removed with the test's scope.
 */
import { Effect } from "effect"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A directory under the system's temp dir, removed with the scope; `write` puts a file in it and answers its path. */
export const tempDir = (prefix = "valet-test-") =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), prefix))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  ).pipe(Effect.map((dir) => ({
    dir,
    write: (name: string, text: string) => {
      writeFileSync(join(dir, name), text)
      return join(dir, name)
    }
  })))
