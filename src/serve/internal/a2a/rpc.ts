/**
 * The JSON-RPC side of the A2A endpoint (spec §9): the version check, the envelope, the params of a method decoded
 * with the field that is wrong named, the A2A errors, and the bodies and SSE frames they travel in.
 */
import { type Duration, Result, Schema, SchemaIssue, Stream } from "effect"
import * as Decode from "../../../core/internal/decode.js"
import * as Wire from "../../../providers/internal/a2a/wire.js"

/** An A2A error as JSON-RPC carries it: a code, one line, and the spec's `google.rpc` details in `data`. */
export class RpcError extends Schema.TaggedError<RpcError>()("A2aRpcError", {
  code: Schema.Int,
  message: Schema.String,
  data: Schema.optional(Schema.Array(Schema.Record(Schema.String, Schema.Unknown)))
}) {}

const errorInfo = (reason: string, metadata: Record<string, string>) => ({
  "@type": "type.googleapis.com/google.rpc.ErrorInfo",
  reason,
  domain: "a2a-protocol.org",
  metadata
})

/** `-32700`: the body is not JSON. */
export const parseError = (detail: string) => new RpcError({ code: Wire.ErrorCode.parseError, message: `Parse error: ${detail}` })

/** `-32600`: not a JSON-RPC request (also the shape of the server's own 401 / 413 / 404). */
export const invalidRequest = (detail: string) => new RpcError({ code: Wire.ErrorCode.invalidRequest, message: `Invalid Request: ${detail}` })

/** A bad field of the params, named as the spec's example does (`message.parts[0]`). */
export const invalidParams = (field: string, description: string) =>
  new RpcError({
    code: Wire.ErrorCode.invalidParams,
    message: `Invalid params: ${field === "" || description.startsWith(field) ? "" : `${field}: `}${description}`,
    data: [{ "@type": "type.googleapis.com/google.rpc.BadRequest", fieldViolations: [{ field, description }] }]
  })

/** `-32601`, naming the 1.0 method when `method` is a 0.3 one. */
export const methodNotFound = (method: string) => {
  const renamed = Wire.legacyMethods[method]
  return new RpcError({
    code: Wire.ErrorCode.methodNotFound,
    message: renamed !== undefined
      ? `Method not found: ${JSON.stringify(method)} is A2A 0.3; this server speaks A2A 1.0, where it is ${JSON.stringify(renamed)}`
      : `Method not found: ${JSON.stringify(method.slice(0, 100))}`
  })
}

/** The task is unknown, another owner's, another agent's, or expired: the id is not confirmed. */
export const taskNotFound = (id: string) =>
  new RpcError({
    code: Wire.ErrorCode.taskNotFound,
    message: `Task not found: ${JSON.stringify(id.slice(0, 200))}`,
    data: [errorInfo("TASK_NOT_FOUND", { taskId: id.slice(0, 200) })]
  })

/** `-32002`: the task has ended otherwise than canceled. */
export const taskNotCancelable = (id: string, state: Wire.TaskState) =>
  new RpcError({
    code: Wire.ErrorCode.taskNotCancelable,
    message: `Task cannot be canceled: task ${JSON.stringify(id)} is ${state}`,
    data: [errorInfo("TASK_NOT_CANCELABLE", { taskId: id, state })]
  })

/** `-32003`: the card declares no push notifications. */
export const pushNotificationNotSupported = () =>
  new RpcError({
    code: Wire.ErrorCode.pushNotificationNotSupported,
    message: "Push Notification is not supported: this agent's card declares pushNotifications: false"
  })

/** `-32004`: an operation this server does not offer, or not in the task's state. */
export const unsupportedOperation = (detail: string) =>
  new RpcError({ code: Wire.ErrorCode.unsupportedOperation, message: `This operation is not supported: ${detail}` })

/** `-32005`: a part's media type no model part takes. */
export const contentTypeNotSupported = (mediaType: string, where: string) =>
  new RpcError({
    code: Wire.ErrorCode.contentTypeNotSupported,
    message: `Incompatible content types: ${where}: ${JSON.stringify(mediaType)} is not a media type this agent takes`,
    data: [errorInfo("CONTENT_TYPE_NOT_SUPPORTED", { mediaType })]
  })

/** `-32603`. */
export const internalError = (detail: string) => new RpcError({ code: Wire.ErrorCode.internalError, message: `Internal error: ${detail}` })

/** `-32009` naming the version asked for and the one served (spec §3.6.2). */
export const versionNotSupported = (requested: string) =>
  new RpcError({
    code: Wire.ErrorCode.versionNotSupported,
    message: requested === "0.3"
      ? `Version not supported: the request names no ${Wire.versionHeader} (A2A 0.3); this server speaks A2A ${Wire.protocolVersion}: send ${Wire.versionHeader}: ${Wire.protocolVersion}`
      : `Version not supported: A2A ${JSON.stringify(requested.slice(0, 20))}; this server speaks A2A ${Wire.protocolVersion}`,
    data: [errorInfo("VERSION_NOT_SUPPORTED", { requested: requested.slice(0, 20), supported: Wire.protocolVersion })]
  })

/**
 * The version a request names: the `A2A-Version` header, else the `A2A-Version` query parameter (spec §3.6.1);
 * none or empty is 0.3. Only Major.Minor counts: `1.0` and `1.0.3` are 1.0.
 */
export const versionProblem = (header: string | undefined, url: string): RpcError | undefined => {
  let requested = header?.trim() ?? ""
  if (requested === "") {
    const query = url.indexOf("?")
    if (query !== -1) {
      for (const [key, value] of new URLSearchParams(url.slice(query + 1))) {
        if (key.toLowerCase() === Wire.versionHeader.toLowerCase()) requested = value.trim()
      }
    }
  }
  if (requested === "") return versionNotSupported("0.3")
  const [major, minor] = requested.split(".")
  return major === "1" && (minor === undefined || minor === "0") ? undefined : versionNotSupported(requested)
}

/**
 * How deep a request's JSON may nest: far more than any A2A message needs, far less than what overflows the stack
 * of the code that reads it (decoding, describing a bad value, `JSON.stringify`).
 */
export const maxDepth = 64

/** Where `json` nests deeper than `limit` (a path such as `params.message.parts[0]`), without recursion; else undefined. */
const tooDeep = (json: unknown, limit: number): string | undefined => {
  interface Node {
    readonly value: unknown
    readonly depth: number
    readonly parent: Node | undefined
    readonly key: string | number
  }
  // The path is made only for the answer: a parent link per node, not a string per node.
  const pathOf = (node: Node): string => {
    let path = ""
    for (let at: Node | undefined = node; at?.parent !== undefined; at = at.parent) {
      path = typeof at.key === "number" ? `[${at.key}]${path}` : `${at.parent.parent === undefined ? "" : "."}${at.key}${path}`
    }
    return path === "" ? "the top" : path
  }
  const stack: Array<Node> = [{ value: json, depth: 0, parent: undefined, key: "" }]
  while (stack.length > 0) {
    const node = stack.pop()!
    const { value, depth } = node
    if (typeof value !== "object" || value === null) continue
    if (depth >= limit) return pathOf(node)
    if (Array.isArray(value)) {
      value.forEach((item, index) => stack.push({ value: item, depth: depth + 1, parent: node, key: index }))
    } else {
      for (const [key, item] of Object.entries(value)) stack.push({ value: item, depth: depth + 1, parent: node, key })
    }
  }
  return undefined
}

/**
 * The longest string id a request may have. The id is echoed on every answer, on every frame of a stream too:
 * unbounded, a 1 MB id would go out once per streamed word.
 */
export const maxIdLength = 128

/** The id of a request's JSON, to echo in an answer: a number, or a string of at most `maxIdLength`; else null. */
export const idOf = (json: unknown): Wire.RequestId => {
  const raw = typeof json === "object" && json !== null && !Array.isArray(json) ? (json as { readonly id?: unknown }).id : undefined
  return typeof raw === "number" || (typeof raw === "string" && raw.length <= maxIdLength) ? raw : null
}

/** A request's envelope from its body text: `-32700` for JSON that does not parse, `-32600` for a bad envelope. */
export const envelopeOf = (text: string): Result.Result<Wire.JsonRpcRequest, { readonly error: RpcError; readonly id: Wire.RequestId }> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    return Result.fail({ error: parseError(error instanceof Error ? error.message : "the body is not JSON"), id: null })
  }
  if (Array.isArray(json)) return Result.fail({ error: invalidRequest("batch requests are not supported by A2A"), id: null })
  // The id is echoed when it can be read, so that the client can match the error to its request.
  const id = idOf(json)
  const deep = tooDeep(json, maxDepth)
  if (deep !== undefined) {
    return Result.fail({ error: invalidRequest(`the request nests more than ${maxDepth} levels of arrays and objects (at ${deep.slice(0, 200)})`), id })
  }
  const decoded = Schema.decodeUnknownResult(Wire.JsonRpcRequest)(json)
  if (Result.isSuccess(decoded)) {
    const given = decoded.success.id
    if (typeof given === "string" && given.length > maxIdLength) {
      return Result.fail({ error: invalidRequest(`the id is a string of at most ${maxIdLength} characters, or a number (this one has ${given.length})`), id: null })
    }
    return Result.succeed(decoded.success)
  }
  return Result.fail({ error: invalidRequest(Decode.describeIssue(decoded.failure.issue, json)), id })
}

/** The path of an issue's first bad field, as the spec names one: `message.parts[0].text`. */
export const fieldOf = (issue: SchemaIssue.Issue): string => {
  const path = SchemaIssue.makeFormatterStandardSchemaV1()(issue).issues[0]?.path ?? []
  return path.reduce<string>((text, segment) => {
    const key = typeof segment === "object" && segment !== null ? segment.key : segment
    return typeof key === "number" ? `${text}[${key}]` : text === "" ? String(key) : `${text}.${String(key)}`
  }, "")
}

/** A method's params decoded with its Schema, or `-32602` naming the first bad field. */
export const paramsOf = <A, I>(schema: Schema.Codec<A, I>, params: unknown): Result.Result<A, RpcError> =>
  Result.mapError(
    Schema.decodeUnknownResult(schema)(params ?? {}),
    (error) => invalidParams(fieldOf(error.issue), Decode.describeIssue(error.issue, params))
  )

/** A JSON-RPC answer body. */
export const resultBody = (id: Wire.RequestId, result: unknown) => ({ jsonrpc: "2.0" as const, id, result })

/** A JSON-RPC error body. */
export const errorBody = (id: Wire.RequestId, error: RpcError) => ({
  jsonrpc: "2.0" as const,
  id,
  error: { code: error.code, message: error.message, ...(error.data !== undefined ? { data: error.data } : {}) }
})

/** One SSE frame of a stream's answer: the request's id on every line (the SDK checks it). */
export const frame = (id: Wire.RequestId, seq: number, result: Wire.StreamResponse): string =>
  `id: ${seq}\ndata: ${JSON.stringify(resultBody(id, result))}\n\n`

/**
 * The text of an SSE answer: each response a frame carrying the request's id, and a `: keep-alive` comment after
 * every `heartbeat` (15 s) of quiet, so that proxies and clients do not take a task that works long for a dead
 * connection. It ends when the responses end.
 */
export const sseText = (
  id: Wire.RequestId,
  responses: Stream.Stream<Wire.StreamResponse>,
  heartbeat: Duration.Input = "15 seconds"
): Stream.Stream<string> => {
  let seq = 0
  const frames = Stream.map(responses, (response) => frame(id, seq++, response))
  const keepAlive = Stream.tick(heartbeat).pipe(Stream.drop(1), Stream.map(() => ": keep-alive\n\n"))
  return Stream.merge(frames, keepAlive, { haltStrategy: "left" })
}
