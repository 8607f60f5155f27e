/**
 * A2A parts → a run's input: `text` → text, `raw` / `url` with an image media type → an image, `raw` WAV or MP3
 * → audio, another `raw` / `url` → a file with its media type, `data` → a text part holding the JSON. Each part is
 * then held to `Model.Part`'s own rules; a part that breaks one is `-32602` naming it, a media type no model part
 * takes (video, say) `-32005`.
 */
import { Result } from "effect"
import type * as Model from "../../../core/Model.js"
import { audioFormatOf, fileMediaTypes, imageMediaTypes, partProblem } from "../../../core/internal/modelSchema.js"
import type * as Wire from "../../../providers/internal/a2a/wire.js"
import * as Rpc from "./rpc.js"

/** The one part as a `Model.Part`, or why not; `where` names it (`message.parts[0]`). */
export const partOf = (part: Wire.Part, where: string): Result.Result<Model.Part, Rpc.RpcError> => {
  const keys = (["text", "raw", "url", "data"] as const).filter((key) => part[key] !== undefined)
  if (keys.length !== 1) {
    return Result.fail(Rpc.invalidParams(where, keys.length === 0
      ? "a part needs one of text, raw, url, data"
      : `a part has one of text, raw, url, data, not ${keys.join(" and ")}`))
  }
  const mediaType = part.mediaType?.trim().toLowerCase()
  let found: Model.Part
  if (part.text !== undefined) {
    found = { type: "text", text: part.text }
  } else if (part.data !== undefined) {
    let text: string
    try {
      text = JSON.stringify(part.data)
    } catch {
      // Only a value nested deeper than the stack gets here (a request body is JSON): a bad request, not a crash.
      return Result.fail(Rpc.invalidParams(`${where}.data`, "the data is nested too deep to read"))
    }
    found = { type: "text", text }
  } else {
    if (mediaType === undefined || mediaType === "") return Result.fail(Rpc.invalidParams(`${where}.mediaType`, "a raw or url part needs its mediaType"))
    const audio = audioFormatOf(mediaType)
    if (mediaType.startsWith("audio/")) {
      if (audio === undefined) return Result.fail(Rpc.contentTypeNotSupported(mediaType, where))
      if (part.url !== undefined) return Result.fail(Rpc.contentTypeNotSupported(mediaType, `${where} (audio is taken as raw bytes, not a url)`))
      found = { type: "audio", data: part.raw!, format: audio }
    } else if (imageMediaTypes.includes(mediaType)) {
      found = part.raw !== undefined ? { type: "image", data: part.raw, mediaType } : { type: "image", url: part.url!, mediaType }
    } else if (fileMediaTypes.includes(mediaType)) {
      const name = part.filename !== undefined && part.filename !== "" ? { name: part.filename } : {}
      found = part.raw !== undefined ? { type: "file", data: part.raw, mediaType, ...name } : { type: "file", url: part.url!, mediaType, ...name }
    } else {
      return Result.fail(Rpc.contentTypeNotSupported(mediaType, where))
    }
  }
  const problem = partProblem(found)
  return problem === undefined ? Result.succeed(found) : Result.fail(Rpc.invalidParams(where, problem))
}

/**
 * A user message's parts as a run's input: its text when every part is text (joined by blank lines), else the
 * parts. A message of no parts is `-32602` (`message.parts`).
 */
export const inputOf = (message: Wire.Message): Result.Result<string | ReadonlyArray<Model.Part>, Rpc.RpcError> => {
  if (message.parts.length === 0) return Result.fail(Rpc.invalidParams("message.parts", "a message needs at least one part"))
  const parts: Array<Model.Part> = []
  for (let i = 0; i < message.parts.length; i++) {
    const part = partOf(message.parts[i]!, `message.parts[${i}]`)
    if (Result.isFailure(part)) return Result.fail(part.failure)
    parts.push(part.success)
  }
  return parts.every((part) => part.type === "text")
    ? Result.succeed(parts.map((part) => (part as Model.TextPart).text).join("\n\n"))
    : Result.succeed(parts)
}

/** A run's input as A2A parts (for the task's history). */
export const partsOfInput = (input: string, parts: ReadonlyArray<Model.Part> | undefined): ReadonlyArray<Wire.Part> =>
  parts === undefined
    ? [{ text: input }]
    : parts.map((part): Wire.Part => {
      switch (part.type) {
        case "text":
          return { text: part.text }
        case "image":
          return part.data !== undefined
            ? { raw: part.data, ...(part.mediaType !== undefined ? { mediaType: part.mediaType } : {}) }
            : { url: part.url!, ...(part.mediaType !== undefined ? { mediaType: part.mediaType } : {}) }
        case "file":
          return { ...(part.data !== undefined ? { raw: part.data } : { url: part.url! }), mediaType: part.mediaType, ...(part.name !== undefined ? { filename: part.name } : {}) }
        case "audio":
          return { raw: part.data, mediaType: part.format === "mp3" ? "audio/mpeg" : `audio/${part.format}` }
      }
    })
