/**
 * Which test files a vitest run selected, seen from a globalSetup: a setup starts (or checks for) what only some
 * suites need when one of them is in the run, and says nothing otherwise.
 */
import { readFileSync } from "node:fs"
import type { TestProject } from "vitest/node"

/**
 * Whether a selected test file's text contains one of `needles` (e.g. an import of the support module the suites
 * use); true when that cannot be told.
 */
export const selectedFilesInclude = async (project: TestProject, needles: ReadonlyArray<string>): Promise<boolean> => {
  try {
    // The CLI's file filters (`vitest run test/core`) are not in vitest's public API; without them every file counts.
    const filters = (project.vitest as unknown as { readonly filenamePattern?: Array<string> }).filenamePattern
    const { testFiles } = await project.globTestFiles(filters ?? [])
    return testFiles.some((file) => {
      const text = readFileSync(file, "utf8")
      return needles.some((needle) => text.includes(needle))
    })
  } catch {
    return true
  }
}
