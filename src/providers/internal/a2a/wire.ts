/**
 * The A2A 1.0 wire, as Schemas: the JSON (ProtoJSON, camelCase, `TASK_STATE_*` / `ROLE_*` enum strings) of the
 * specification's `a2a.proto` (a2aproject/A2A v1.0.1) that the JSON-RPC binding carries. valet's server
 * (`serve/A2aApi`) decodes requests with it and builds its answers to these types; an A2A client decodes the
 * answers with it. Here, in the providers layer, because both sides use it and serve may import providers, not the
 * other way round.
 *
 * 0.3 shapes (`kind` discriminators, lowercase states, `final`) do not decode: `"completed"` is not a state here.
 * Extra keys are ignored, as ProtoJSON readers ignore unknown fields.
 */
import { Schema } from "effect"

/** The protocol version this wire is (`A2A-Version`, `supportedInterfaces[].protocolVersion`). */
export const protocolVersion = "1.0"

/** The header naming the protocol version of a request (spec §3.6.1). */
export const versionHeader = "A2A-Version"

const JsonObject = Schema.Record(Schema.String, Schema.Unknown)

/** `TaskState` (proto enum, as its name). */
export const TaskState = Schema.Literals([
  "TASK_STATE_SUBMITTED",
  "TASK_STATE_WORKING",
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_INPUT_REQUIRED",
  "TASK_STATE_REJECTED",
  "TASK_STATE_AUTH_REQUIRED"
])
/** A decoded `TaskState`. */
export type TaskState = typeof TaskState.Type

/** The states a task never leaves (spec §3.1.1: a message to one of them is refused). */
export const terminalStates: ReadonlySet<TaskState> = new Set([
  "TASK_STATE_COMPLETED",
  "TASK_STATE_FAILED",
  "TASK_STATE_CANCELED",
  "TASK_STATE_REJECTED"
])

/** `Role`. */
export const Role = Schema.Literals(["ROLE_USER", "ROLE_AGENT"])
/** A decoded `Role`. */
export type Role = typeof Role.Type

/**
 * `Part`: exactly one of `text`, `raw` (base64 bytes), `url`, `data` (any JSON value), with an optional media type,
 * file name and metadata. "Exactly one" is checked by the reader, which names the part (`message.parts[1]`).
 */
export const Part = Schema.Struct({
  text: Schema.optional(Schema.String),
  raw: Schema.optional(Schema.String),
  url: Schema.optional(Schema.String),
  data: Schema.optional(Schema.Unknown),
  mediaType: Schema.optional(Schema.String),
  filename: Schema.optional(Schema.String),
  metadata: Schema.optional(JsonObject)
})
/** A decoded `Part`. */
export type Part = typeof Part.Type

/** `Message`. */
export const Message = Schema.Struct({
  messageId: Schema.String,
  contextId: Schema.optional(Schema.String),
  taskId: Schema.optional(Schema.String),
  role: Role,
  parts: Schema.Array(Part),
  metadata: Schema.optional(JsonObject),
  extensions: Schema.optional(Schema.Array(Schema.String)),
  referenceTaskIds: Schema.optional(Schema.Array(Schema.String))
})
/** A decoded `Message`. */
export type Message = typeof Message.Type

/** `TaskStatus`; `timestamp` is ISO-8601 UTC. */
export const TaskStatus = Schema.Struct({
  state: TaskState,
  message: Schema.optional(Message),
  timestamp: Schema.optional(Schema.String)
})
/** A decoded `TaskStatus`. */
export type TaskStatus = typeof TaskStatus.Type

/** `Artifact`. */
export const Artifact = Schema.Struct({
  artifactId: Schema.String,
  name: Schema.optional(Schema.String),
  description: Schema.optional(Schema.String),
  parts: Schema.Array(Part),
  metadata: Schema.optional(JsonObject),
  extensions: Schema.optional(Schema.Array(Schema.String))
})
/** A decoded `Artifact`. */
export type Artifact = typeof Artifact.Type

/** `Task`. */
export const Task = Schema.Struct({
  id: Schema.String,
  contextId: Schema.String,
  status: TaskStatus,
  artifacts: Schema.optional(Schema.Array(Artifact)),
  history: Schema.optional(Schema.Array(Message)),
  metadata: Schema.optional(JsonObject)
})
/** A decoded `Task`. */
export type Task = typeof Task.Type

/** `TaskStatusUpdateEvent` (1.0 has no `final`: the stream closes instead). */
export const TaskStatusUpdateEvent = Schema.Struct({
  taskId: Schema.String,
  contextId: Schema.String,
  status: TaskStatus,
  metadata: Schema.optional(JsonObject)
})
/** A decoded `TaskStatusUpdateEvent`. */
export type TaskStatusUpdateEvent = typeof TaskStatusUpdateEvent.Type

/** `TaskArtifactUpdateEvent`: `append: false` replaces the artifact's parts, `true` adds to them. */
export const TaskArtifactUpdateEvent = Schema.Struct({
  taskId: Schema.String,
  contextId: Schema.String,
  artifact: Artifact,
  append: Schema.optional(Schema.Boolean),
  lastChunk: Schema.optional(Schema.Boolean),
  metadata: Schema.optional(JsonObject)
})
/** A decoded `TaskArtifactUpdateEvent`. */
export type TaskArtifactUpdateEvent = typeof TaskArtifactUpdateEvent.Type

/** `StreamResponse`: one of a task, a message, a status update, an artifact update. */
export const StreamResponse = Schema.Union([
  Schema.Struct({ task: Task }),
  Schema.Struct({ message: Message }),
  Schema.Struct({ statusUpdate: TaskStatusUpdateEvent }),
  Schema.Struct({ artifactUpdate: TaskArtifactUpdateEvent })
])
/** A decoded `StreamResponse`. */
export type StreamResponse = typeof StreamResponse.Type

/** `SendMessageResponse`: a task or a message. */
export const SendMessageResponse = Schema.Union([Schema.Struct({ task: Task }), Schema.Struct({ message: Message })])
/** A decoded `SendMessageResponse`. */
export type SendMessageResponse = typeof SendMessageResponse.Type

/** `SendMessageConfiguration`. */
export const SendMessageConfiguration = Schema.Struct({
  acceptedOutputModes: Schema.optional(Schema.Array(Schema.String)),
  historyLength: Schema.optional(Schema.Int),
  returnImmediately: Schema.optional(Schema.Boolean),
  taskPushNotificationConfig: Schema.optional(Schema.Unknown)
})
/** A decoded `SendMessageConfiguration`. */
export type SendMessageConfiguration = typeof SendMessageConfiguration.Type

/** `SendMessageRequest` (the params of `SendMessage` and `SendStreamingMessage`). */
export const SendMessageRequest = Schema.Struct({
  tenant: Schema.optional(Schema.String),
  message: Message,
  configuration: Schema.optional(SendMessageConfiguration),
  metadata: Schema.optional(JsonObject)
})
/** A decoded `SendMessageRequest`. */
export type SendMessageRequest = typeof SendMessageRequest.Type

/** `GetTaskRequest`. */
export const GetTaskRequest = Schema.Struct({
  tenant: Schema.optional(Schema.String),
  id: Schema.String,
  historyLength: Schema.optional(Schema.Int)
})
/** A decoded `GetTaskRequest`. */
export type GetTaskRequest = typeof GetTaskRequest.Type

/** `CancelTaskRequest`. */
export const CancelTaskRequest = Schema.Struct({
  tenant: Schema.optional(Schema.String),
  id: Schema.String,
  metadata: Schema.optional(JsonObject)
})
/** A decoded `CancelTaskRequest`. */
export type CancelTaskRequest = typeof CancelTaskRequest.Type

/** `SubscribeToTaskRequest`. */
export const SubscribeToTaskRequest = Schema.Struct({
  tenant: Schema.optional(Schema.String),
  id: Schema.String
})
/** A decoded `SubscribeToTaskRequest`. */
export type SubscribeToTaskRequest = typeof SubscribeToTaskRequest.Type

/** `ListTasksRequest`. */
export const ListTasksRequest = Schema.Struct({
  tenant: Schema.optional(Schema.String),
  contextId: Schema.optional(Schema.String),
  // The enum's zero value means no filter (ProtoJSON writers may send it).
  status: Schema.optional(Schema.Union([TaskState, Schema.Literal("TASK_STATE_UNSPECIFIED")])),
  pageSize: Schema.optional(Schema.Int),
  pageToken: Schema.optional(Schema.String),
  historyLength: Schema.optional(Schema.Int),
  statusTimestampAfter: Schema.optional(Schema.String),
  includeArtifacts: Schema.optional(Schema.Boolean)
})
/** A decoded `ListTasksRequest`. */
export type ListTasksRequest = typeof ListTasksRequest.Type

/** `ListTasksResponse`: `nextPageToken` is `""` on the last page. */
export const ListTasksResponse = Schema.Struct({
  tasks: Schema.Array(Task),
  nextPageToken: Schema.String,
  pageSize: Schema.Int,
  totalSize: Schema.Int
})
/** A decoded `ListTasksResponse`. */
export type ListTasksResponse = typeof ListTasksResponse.Type

/** `AgentInterface`. */
export const AgentInterface = Schema.Struct({
  url: Schema.String,
  protocolBinding: Schema.String,
  protocolVersion: Schema.String,
  tenant: Schema.optional(Schema.String)
})
/** A decoded `AgentInterface`. */
export type AgentInterface = typeof AgentInterface.Type

/** `AgentSkill`. */
export const AgentSkill = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  description: Schema.String,
  tags: Schema.Array(Schema.String),
  examples: Schema.optional(Schema.Array(Schema.String)),
  inputModes: Schema.optional(Schema.Array(Schema.String)),
  outputModes: Schema.optional(Schema.Array(Schema.String))
})
/** A decoded `AgentSkill`. */
export type AgentSkill = typeof AgentSkill.Type

/** `AgentCard` (the fields valet reads and writes; others are ignored). */
export const AgentCard = Schema.Struct({
  name: Schema.String,
  description: Schema.String,
  version: Schema.String,
  supportedInterfaces: Schema.Array(AgentInterface),
  capabilities: Schema.Struct({
    streaming: Schema.optional(Schema.Boolean),
    pushNotifications: Schema.optional(Schema.Boolean),
    extendedAgentCard: Schema.optional(Schema.Boolean)
  }),
  defaultInputModes: Schema.Array(Schema.String),
  defaultOutputModes: Schema.Array(Schema.String),
  skills: Schema.Array(AgentSkill),
  securitySchemes: Schema.optional(JsonObject),
  securityRequirements: Schema.optional(Schema.Array(JsonObject))
})
/** A decoded `AgentCard`. */
export type AgentCard = typeof AgentCard.Type

/** A JSON-RPC 2.0 request id. */
export const RequestId = Schema.Union([Schema.String, Schema.Number, Schema.Null])
/** A decoded `RequestId`. */
export type RequestId = typeof RequestId.Type

/** A JSON-RPC 2.0 request (a batch is not A2A's: an array is refused). */
export const JsonRpcRequest = Schema.Struct({
  jsonrpc: Schema.Literal("2.0"),
  id: Schema.optional(RequestId),
  method: Schema.String,
  params: Schema.optional(JsonObject)
})
/** A decoded `JsonRpcRequest`. */
export type JsonRpcRequest = typeof JsonRpcRequest.Type

/** A JSON-RPC 2.0 error object. */
export const JsonRpcError = Schema.Struct({
  code: Schema.Int,
  message: Schema.String,
  data: Schema.optional(Schema.Unknown)
})
/** A decoded `JsonRpcError`. */
export type JsonRpcError = typeof JsonRpcError.Type

/** The A2A error codes of the JSON-RPC binding (spec §5.4). */
export const ErrorCode = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  taskNotFound: -32001,
  taskNotCancelable: -32002,
  pushNotificationNotSupported: -32003,
  unsupportedOperation: -32004,
  contentTypeNotSupported: -32005,
  invalidAgentResponse: -32006,
  extendedAgentCardNotConfigured: -32007,
  extensionSupportRequired: -32008,
  versionNotSupported: -32009
} as const

/** The 1.0 method of each 0.3 one, for the error a 0.3 method name gets. */
export const legacyMethods: Readonly<Record<string, string>> = {
  "message/send": "SendMessage",
  "message/stream": "SendStreamingMessage",
  "tasks/get": "GetTask",
  "tasks/list": "ListTasks",
  "tasks/cancel": "CancelTask",
  "tasks/resubscribe": "SubscribeToTask",
  "tasks/pushNotificationConfig/set": "CreateTaskPushNotificationConfig",
  "tasks/pushNotificationConfig/get": "GetTaskPushNotificationConfig",
  "tasks/pushNotificationConfig/list": "ListTaskPushNotificationConfigs",
  "tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
  "agent/getAuthenticatedExtendedCard": "GetExtendedAgentCard"
}
