/**
 * Token data packed for a trajectory line: base64 (RFC 4648, padded) of 4-byte little-endian values — int32 for
 * token ids, float32 for log-probabilities (NaN where the server gave none). A 2,000-token completion is ~10.7 KB
 * of text per array instead of ~40 KB as a JSON array of objects; NumPy reads it with
 * `np.frombuffer(base64.b64decode(s), "<i4")` / `"<f4"`.
 */

/** Whether `text` is base64 of a whole number of 4-byte values. */
export const isPacked = (text: string): boolean =>
  text.length % 4 === 0 &&
  /^[A-Za-z0-9+/]*={0,2}$/.test(text) &&
  // 4-byte values: the decoded length (3 bytes per 4 characters, less the padding) is a multiple of 4.
  ((text.length / 4) * 3 - (text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0)) % 4 === 0

const pack = (values: ReadonlyArray<number> | ArrayLike<number>, write: (view: DataView, at: number, value: number) => void): string => {
  const view = new DataView(new ArrayBuffer(values.length * 4))
  for (let i = 0; i < values.length; i++) write(view, i * 4, values[i]!)
  return Buffer.from(view.buffer).toString("base64")
}

const bytesOf = (text: string): DataView => {
  const bytes = Buffer.from(text, "base64")
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength - (bytes.byteLength % 4))
}

/** Token ids → base64 of int32 little-endian. */
export const packInt32 = (values: ReadonlyArray<number> | Int32Array): string =>
  pack(values, (view, at, value) => view.setInt32(at, value, true))

/** Log-probabilities → base64 of float32 little-endian; `null` is stored as NaN. */
export const packFloat32 = (values: ReadonlyArray<number | null> | Float32Array): string =>
  pack(
    Array.from(values as ArrayLike<number | null>, (value) => value ?? Number.NaN),
    (view, at, value) => view.setFloat32(at, value, true)
  )

/** base64 of int32 little-endian → the values. */
export const unpackInt32 = (text: string): Int32Array => {
  const view = bytesOf(text)
  const out = new Int32Array(view.byteLength / 4)
  for (let i = 0; i < out.length; i++) out[i] = view.getInt32(i * 4, true)
  return out
}

/** base64 of float32 little-endian → the values (NaN: none given). */
export const unpackFloat32 = (text: string): Float32Array => {
  const view = bytesOf(text)
  const out = new Float32Array(view.byteLength / 4)
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true)
  return out
}
