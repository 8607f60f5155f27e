/**
 * valet content parts ↔ `effect/ai` prompt parts, both ways. `effect/ai` has one `file` part for every medium,
 * told apart by its media type: valet's images are `image/*` files, its audio `audio/*` files.
 */
import { Base64 } from "effect/encoding"
import { Result } from "effect"
import type { Prompt } from "effect/ai"
import * as Model from "../../../core/Model.js"
import { cacheOptions } from "./cacheControl.js"

/** A valet part as an `effect/ai` user message part. */
export const toPromptPart = (part: Model.Part): Prompt.UserMessagePartEncoded => {
  switch (part.type) {
    case "text":
      return { type: "text", text: part.text, ...cacheOptions(part.cacheControl) }
    case "image":
      return part.url !== undefined
        ? { type: "file", mediaType: part.mediaType ?? "image/*", data: new URL(part.url) }
        : { type: "file", mediaType: part.mediaType!, data: { _tag: "Uint8Array", base64: part.data! } }
    case "file":
      return {
        type: "file",
        mediaType: part.mediaType,
        ...(part.name !== undefined ? { fileName: part.name } : {}),
        data: part.url !== undefined ? new URL(part.url) : { _tag: "Uint8Array", base64: part.data! }
      }
    case "audio":
      return { type: "file", mediaType: Model.audioMediaTypes[part.format], data: { _tag: "Uint8Array", base64: part.data } }
  }
}

/** A valet message's content as an `effect/ai` user message's content: text stays text. */
export const toPromptContent = (content: Model.Content): string | Array<Prompt.UserMessagePartEncoded> =>
  typeof content === "string" ? content : content.map(toPromptPart)

const isUrlText = (data: string): boolean => /^(https?|data):/i.test(data)

/**
 * An `effect/ai` file part as a valet part, or what is wrong with it (checked as valet checks every part: a known
 * media type, an http(s) or data URL, bytes under the cap).
 */
export const fromFilePart = (part: Prompt.FilePart): Result.Result<Model.Part, string> => {
  const data = part.data
  const source: { readonly url: string } | { readonly data: string } = data instanceof URL
    ? { url: data.href }
    : typeof data === "string"
    ? isUrlText(data) ? { url: data } : { data }
    : { data: Base64.encode(data) }
  const mediaType = part.mediaType.toLowerCase()
  let out: Model.Part
  if (mediaType.startsWith("image/")) {
    out = "url" in source
      ? { type: "image", url: source.url, ...(mediaType !== "image/*" ? { mediaType } : {}) }
      : { type: "image", data: source.data, mediaType }
  } else if (mediaType.startsWith("audio/")) {
    const format = Model.audioFormatOf(mediaType)
    if (format === undefined) return Result.fail(`unknown audio media type "${part.mediaType}" (known: ${Model.knownAudioMediaTypes.join(", ")})`)
    if ("url" in source) return Result.fail("audio is sent as bytes, not by URL")
    out = { type: "audio", data: source.data, format }
  } else {
    out = {
      type: "file",
      ...source,
      mediaType,
      ...(part.fileName !== undefined ? { name: part.fileName } : {})
    }
  }
  const problem = Model.partProblem(out)
  return problem === undefined ? Result.succeed(out) : Result.fail(problem)
}
