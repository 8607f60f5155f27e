/**
 * Parquet output through `hyparquet-writer` (an optional peer dependency, loaded when Parquet is asked for): the
 * schema of each format, and rows → the file's bytes, a row group at a time.
 */
import { Effect, Stream } from "effect"
import { ExportError } from "./error.js"

/** A node of a Parquet schema, before it is flattened into the file's `SchemaElement` list. */
interface Node {
  readonly name: string
  readonly type?: "BOOLEAN" | "INT32" | "INT64" | "FLOAT" | "DOUBLE" | "BYTE_ARRAY"
  readonly converted_type?: "UTF8" | "LIST"
  readonly repetition_type: "REQUIRED" | "OPTIONAL" | "REPEATED"
  readonly children?: ReadonlyArray<Node>
}

/** What `hyparquet-writer` is given: a schema element as the Parquet format names its fields. */
export interface SchemaElement {
  readonly name: string
  readonly type?: Node["type"]
  readonly converted_type?: Node["converted_type"]
  readonly repetition_type?: Node["repetition_type"]
  readonly num_children?: number
}

const req = (optional: boolean) => (optional ? "OPTIONAL" : "REQUIRED")
const text = (name: string, optional = false): Node => ({ name, type: "BYTE_ARRAY", converted_type: "UTF8", repetition_type: req(optional) })
const scalar = (name: string, type: "INT32" | "INT64" | "FLOAT" | "DOUBLE", optional = false): Node => ({ name, type, repetition_type: req(optional) })
const struct = (name: string, children: ReadonlyArray<Node>, optional = false): Node => ({ name, repetition_type: req(optional), children })
/** The 3-level LIST of the Parquet spec (what pyarrow, pandas and `datasets` read as a list column). */
const list = (name: string, element: Omit<Node, "name" | "repetition_type">, options: { optional?: boolean; elementOptional?: boolean } = {}): Node => ({
  name,
  converted_type: "LIST",
  repetition_type: req(options.optional ?? false),
  children: [{
    name: "list",
    repetition_type: "REPEATED",
    children: [{ ...element, name: "element", repetition_type: req(options.elementOptional ?? false) }]
  }]
})

const messages = (name: string): Node => list(name, { children: [text("role"), text("content")] })
const ints = (name: string): Node => list(name, { type: "INT32" })
const floats = (name: string): Node => list(name, { type: "FLOAT" }, { optional: true, elementOptional: true })

/** The columns of each format, in order (the JSONL rows' keys, typed). */
export const columns: Record<"sft-chat" | "grpo" | "tokens", ReadonlyArray<Node>> = {
  "sft-chat": [messages("messages")],
  grpo: [
    messages("prompt"),
    messages("completion"),
    scalar("reward", "DOUBLE", true),
    scalar("advantage", "DOUBLE", true),
    text("group_id"),
    text("uid"),
    scalar("group_size", "INT32"),
    text("data_source"),
    struct("reward_model", [text("style"), text("ground_truth", true)]),
    struct("extra_info", [
      scalar("index", "INT64"),
      text("task_id"),
      scalar("step", "INT32"),
      text("episode_id"),
      scalar("episode_step", "INT32"),
      text("episode_end"),
      scalar("seed", "INT64", true),
      scalar("step_reward", "DOUBLE", true)
    ])
  ],
  tokens: [
    text("task_id"),
    scalar("step", "INT32"),
    text("episode_id", true),
    scalar("episode_step", "INT32", true),
    text("group_id", true),
    scalar("reward", "DOUBLE", true),
    scalar("episode_reward", "DOUBLE", true),
    ints("prompt_ids"),
    ints("completion_ids"),
    floats("completion_logprobs"),
    floats("prompt_logprobs"),
    ints("input_ids"),
    ints("attention_mask"),
    ints("loss_mask")
  ]
}

const flatten = (node: Node): Array<SchemaElement> => {
  const { children, ...element } = node
  return children === undefined
    ? [element]
    : [{ ...element, num_children: children.length }, ...children.flatMap(flatten)]
}

/** The file schema of a format: the root and its columns, flattened depth first. */
export const schemaOf = (format: keyof typeof columns): Array<SchemaElement> =>
  flatten({ name: "root", repetition_type: "REQUIRED", children: columns[format] }).map((element, i) => {
    if (i > 0) return element
    // The root has no repetition.
    const { repetition_type: _, ...root } = element
    return root
  })

/** The part of `hyparquet-writer` used here (typed here: the package is optional, its types may be absent). */
interface Writer {
  index: number
  readonly buffer: ArrayBuffer
}
interface HyparquetWriter {
  readonly ByteWriter: new() => Writer
  readonly ParquetWriter: new(options: { writer: Writer; schema: Array<SchemaElement>; createdBy?: string }) => {
    write(options: { columnData: Array<{ name: string; data: Array<unknown> }>; rowGroupSize?: number }): void | Promise<void>
    finish(): void | Promise<void>
  }
}

/** The package, imported now (a specifier in a variable: type checkers and bundlers do not require it). */
const load: Effect.Effect<HyparquetWriter, ExportError> = Effect.tryPromise({
  try: () => {
    const specifier = "hyparquet-writer"
    return import(specifier) as Promise<HyparquetWriter>
  },
  catch: () => new ExportError({ message: "Parquet output needs the optional package hyparquet-writer: npm install hyparquet-writer" })
})

/** A value as the writer takes it for `node`: INT64 as a bigint (the writer refuses numbers there), the rest as is. */
const prepare = (node: Node, value: unknown): unknown => {
  if (value === null || value === undefined) return value
  if (node.type === "INT64") return typeof value === "number" ? BigInt(value) : value
  if (node.children === undefined || !hasInt64(node)) return value
  if (node.converted_type === "LIST") {
    const element = node.children[0]!.children![0]!
    return (value as ReadonlyArray<unknown>).map((item) => prepare(element, item))
  }
  const struct = value as Record<string, unknown>
  return Object.fromEntries(node.children.map((child) => [child.name, prepare(child, struct[child.name])]))
}

const hasInt64 = (node: Node): boolean => node.type === "INT64" || (node.children ?? []).some(hasInt64)

/** Rows of a row group. */
const rowGroup = 1000

/**
 * A format's rows as a Parquet file's bytes, emitted after each row group (a file that is written as it goes, not
 * held whole), the footer last.
 */
export const encode = <E, R>(
  format: keyof typeof columns,
  rows: Stream.Stream<object, E, R>
): Stream.Stream<Uint8Array, E | ExportError, R> =>
  Stream.unwrap(Effect.map(load, (module) => {
    const writer = new module.ByteWriter()
    const file = new module.ParquetWriter({ writer, schema: schemaOf(format), createdBy: "valet" })
    const nodes = columns[format]
    // What the writer holds since the last drain; `offset` (positions in the file) is the writer's own count.
    const drain = (): Uint8Array => {
      const bytes = new Uint8Array(writer.buffer, 0, writer.index).slice()
      writer.index = 0
      return bytes
    }
    const attempt = (what: string, run: () => void | Promise<void>) =>
      Effect.tryPromise({
        try: async () => {
          await run()
          return drain()
        },
        catch: (error) =>
          new ExportError({ message: `cannot write Parquet (${what}): ${error instanceof Error ? error.message : String(error)}` })
      })
    return rows.pipe(
      Stream.grouped(rowGroup),
      Stream.mapEffect((batch) =>
        attempt("a row group", () =>
          file.write({
            columnData: nodes.map((node) => ({
              name: node.name,
              data: batch.map((row) => prepare(node, (row as Record<string, unknown>)[node.name]))
            })),
            rowGroupSize: batch.length
          }))
      ),
      Stream.concat(Stream.fromEffect(attempt("the footer", () => file.finish())))
    )
  }))
