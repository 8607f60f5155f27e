/**
 * Damaged SQLite files for the storage tests: pages overwritten in place, as a failing disk or a stray write leaves
 * them.
 */
import { closeSync, openSync, statSync, writeSync } from "node:fs"

/** SQLite's default page size (valet never changes it). */
export const pageSize = 4096

/**
 * Overwrites the middle pages of the SQLite file at `path` (their whole 4096 bytes, with 0xde), leaving its first
 * page (the header and schema) intact: the file still opens, and reading those pages fails with SQLITE_CORRUPT.
 * Answers the pages overwritten (1-based).
 */
export const damageMiddlePages = (path: string, count = 8): ReadonlyArray<number> => {
  const pages = Math.floor(statSync(path).size / pageSize)
  if (pages < count + 2) throw new Error(`${path} has ${pages} pages: too few to damage ${count} in the middle`)
  const first = Math.floor((pages - count) / 2) + 1
  const damaged = Array.from({ length: count }, (_, i) => first + i)
  const fd = openSync(path, "r+")
  try {
    for (const page of damaged) writeSync(fd, Buffer.alloc(pageSize, 0xde), 0, pageSize, (page - 1) * pageSize)
  } finally {
    closeSync(fd)
  }
  return damaged
}
