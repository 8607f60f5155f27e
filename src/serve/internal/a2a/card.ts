/**
 * The agent card of a served agent (proto `AgentCard`, spec §8): one JSON-RPC interface at its own endpoint, one
 * skill (a REQUIRED array has at least one element, spec §5.7) whose description says how to answer the requests
 * a task waiting for a person makes (valet's convention), and the bearer scheme when the server has a token.
 */
import * as Wire from "../../../providers/internal/a2a/wire.js"
import type * as Agents from "../../Agents.js"

/** The media types a valet agent takes as input parts: text, JSON, the images, PDF, WAV and MP3. */
export const inputModes: ReadonlyArray<string> = [
  "text/plain",
  "application/json",
  "image/png",
  "image/jpeg",
  "image/webp",
  "image/gif",
  "application/pdf",
  "audio/wav",
  "audio/mpeg"
]

const answering = "A task waiting for a person (TASK_STATE_INPUT_REQUIRED) carries its request as a data part: " +
  "continue it with a message naming its taskId, carrying a data part {\"approved\": true|false, \"reason\"?, \"arguments\"?, \"toolCallId\"?} " +
  "for an approval, or {\"answer\": …, \"questionId\"?} (or text) for a question."

/** The card of `entry`, whose JSON-RPC endpoint is `url`; `bearer` when requests need the server's token. */
export const cardOf = (entry: Agents.Entry, url: string, options: { readonly bearer: boolean; readonly version: string }): Wire.AgentCard => ({
  name: entry.name,
  description: entry.description !== "" ? entry.description : entry.name,
  version: options.version,
  supportedInterfaces: [{ url, protocolBinding: "JSONRPC", protocolVersion: Wire.protocolVersion }],
  capabilities: { streaming: true, pushNotifications: false, extendedAgentCard: false },
  defaultInputModes: inputModes,
  defaultOutputModes: ["text/plain", "application/json"],
  skills: [{
    id: entry.name,
    name: entry.name,
    description: `${entry.description !== "" ? entry.description : entry.name}. ${answering}`,
    tags: [entry.architecture]
  }],
  ...(options.bearer
    ? {
      securitySchemes: { bearer: { httpAuthSecurityScheme: { scheme: "Bearer" } } },
      securityRequirements: [{ schemes: { bearer: { list: [] } } }]
    }
    : {})
})
