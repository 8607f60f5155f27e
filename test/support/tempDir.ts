/**
 * A temporary directory for a test's files, removed with the test's scope.
 */
import { afterAll } from "@effect/vitest"
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

/**
 * Plain temporary directories for one test file (code outside an Effect scope makes them), all removed after its
 * last test: call once at the file's top level.
 */
export const tempDirsOfFile = (): ((prefix: string) => string) => {
  const made: Array<string> = []
  afterAll(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true })
  })
  return (prefix) => {
    const dir = mkdtempSync(join(tmpdir(), prefix))
    made.push(dir)
    return dir
  }
}
