/**
 * Vectors as the stores keep them and compare them: float32, little-endian bytes (4 per dimension, the layout
 * `sqlite-vec` reads as a vector blob), cosine similarity, and the top k of a scan kept without sorting everything.
 * Shared by `EmbeddingModel`, the thread stores (memory, SQL) and the benchmark, so that every path scores alike.
 */

/** Why `vector` cannot be stored or compared, or `undefined` when it can: a non-empty list of finite numbers, not all 0. */
export const vectorProblem = (vector: ReadonlyArray<number> | Float32Array): string | undefined => {
  if (vector.length === 0) return "it is empty"
  let zero = true
  for (let i = 0; i < vector.length; i++) {
    const x = vector[i]!
    if (typeof x !== "number" || !Number.isFinite(x)) return `its element ${i} is ${String(x)}, not a finite number`
    if (x !== 0) zero = false
  }
  // A zero vector has no direction: no cosine with anything.
  return zero ? "it is all zeros (no direction to compare)" : undefined
}

/** A vector as float32 little-endian bytes. */
export const toBytes = (vector: ReadonlyArray<number> | Float32Array): Uint8Array => {
  const floats = vector instanceof Float32Array ? vector : Float32Array.from(vector)
  const bytes = new Uint8Array(floats.length * 4)
  const view = new DataView(bytes.buffer)
  for (let i = 0; i < floats.length; i++) view.setFloat32(i * 4, floats[i]!, true)
  return bytes
}

/**
 * The vector in float32 little-endian bytes, or why not: the length must be `dimensions * 4` and every element
 * finite. (A driver may hand back a `Buffer` at any byte offset: read through a `DataView`, never a typed array view
 * that needs alignment.)
 */
export const fromBytes = (bytes: unknown, dimensions: number): Float32Array | string => {
  if (!(bytes instanceof Uint8Array)) return `the vector is not bytes (${bytes === null ? "null" : typeof bytes})`
  if (bytes.length !== dimensions * 4) return `the vector holds ${bytes.length} bytes, not ${dimensions * 4} (${dimensions} float32 dimensions)`
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out = new Float32Array(dimensions)
  for (let i = 0; i < dimensions; i++) {
    const x = view.getFloat32(i * 4, true)
    if (!Number.isFinite(x)) return `element ${i} of the vector is ${String(x)}`
    out[i] = x
  }
  return out
}

/** The Euclidean norm. */
export const norm = (vector: ReadonlyArray<number> | Float32Array): number => {
  let sum = 0
  for (let i = 0; i < vector.length; i++) sum += vector[i]! * vector[i]!
  return Math.sqrt(sum)
}

/** Cosine similarity in [-1, 1] (0 when either vector is all zeros, or the lengths differ). */
export const cosine = (a: ReadonlyArray<number> | Float32Array, b: ReadonlyArray<number> | Float32Array): number => {
  if (a.length !== b.length) return 0
  let dot = 0
  let na = 0
  let nb = 0
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!
    const y = b[i]!
    dot += x * y
    na += x * x
    nb += y * y
  }
  return na === 0 || nb === 0 ? 0 : dot / Math.sqrt(na * nb)
}

/** Cosine with the query's norm computed once: the inner loop of a scan. */
export const cosineWith = (query: Float32Array, queryNorm: number, row: Float32Array): number => {
  let dot = 0
  let nr = 0
  for (let i = 0; i < query.length; i++) {
    const y = row[i]!
    dot += query[i]! * y
    nr += y * y
  }
  return nr === 0 || queryNorm === 0 ? 0 : dot / (queryNorm * Math.sqrt(nr))
}

/**
 * The best `k` of a stream of scored items, best first: a sorted array of at most `k`, each new item placed by
 * binary search only when it beats the worst kept (a scan of n items costs n comparisons plus k log k).
 */
export class TopK<A> {
  private readonly items: Array<{ readonly score: number; readonly item: A }> = []
  constructor(private readonly k: number) {}

  /** The score an item must beat to be kept (−Infinity while fewer than k are kept). */
  get threshold(): number {
    return this.items.length < this.k ? -Infinity : this.items[this.items.length - 1]!.score
  }

  offer(score: number, item: A): void {
    if (this.k <= 0 || score <= this.threshold) return
    let lo = 0
    let hi = this.items.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.items[mid]!.score >= score) lo = mid + 1
      else hi = mid
    }
    this.items.splice(lo, 0, { score, item })
    if (this.items.length > this.k) this.items.pop()
  }

  /** Best first. */
  result(): ReadonlyArray<{ readonly score: number; readonly item: A }> {
    return this.items
  }
}
