import type * as Model from "./modelSchema.js"

interface ToolCallParts {
  id: string
  name: string
  arguments: string
}

interface ChoiceParts {
  text: string
  reasoning: string | undefined
  toolCalls: Map<number, ToolCallParts>
  finishReason: Model.FinishReason | undefined
  stopReason: string | number | undefined
  logprobs: Array<Model.TokenLogprob> | undefined
  tokenIds: Array<number> | undefined
  reasoningItems: ReadonlyArray<Model.ReasoningItem> | undefined
}

/** Mutable on purpose: a long stream folds into it without allocating a new state per chunk. */
export interface Accumulator {
  id: string
  model: string
  choices: Map<number, ChoiceParts>
  usage: Model.Usage | undefined
  promptTokenIds: ReadonlyArray<number> | undefined
  promptLogprobs: ReadonlyArray<number | null> | undefined
}

export const emptyAccumulator = (): Accumulator => ({
  id: "",
  model: "",
  choices: new Map(),
  usage: undefined,
  promptTokenIds: undefined,
  promptLogprobs: undefined
})

const choiceOf = (acc: Accumulator, index: number): ChoiceParts => {
  let choice = acc.choices.get(index)
  if (choice === undefined) {
    choice = {
      text: "",
      reasoning: undefined,
      toolCalls: new Map(),
      finishReason: undefined,
      stopReason: undefined,
      logprobs: undefined,
      tokenIds: undefined,
      reasoningItems: undefined
    }
    acc.choices.set(index, choice)
  }
  return choice
}

export const addChunk = (acc: Accumulator, chunk: Model.Chunk): Accumulator => {
  switch (chunk._tag) {
    case "Metadata": {
      acc.id = chunk.id
      acc.model = chunk.model
      if (chunk.promptTokenIds !== undefined) acc.promptTokenIds = chunk.promptTokenIds
      if (chunk.promptLogprobs !== undefined) acc.promptLogprobs = chunk.promptLogprobs
      break
    }
    case "TextDelta": {
      const choice = choiceOf(acc, chunk.index)
      choice.text += chunk.text
      if (chunk.logprobs !== undefined) {
        // In place: `concat` would copy the whole list on every token, quadratic in a long answer.
        if (choice.logprobs === undefined) choice.logprobs = [...chunk.logprobs]
        else for (const entry of chunk.logprobs) choice.logprobs.push(entry)
      }
      if (chunk.tokenIds !== undefined) {
        if (choice.tokenIds === undefined) choice.tokenIds = [...chunk.tokenIds]
        else for (const id of chunk.tokenIds) choice.tokenIds.push(id)
      }
      break
    }
    case "ReasoningDelta": {
      const choice = choiceOf(acc, chunk.index)
      choice.reasoning = (choice.reasoning ?? "") + chunk.text
      break
    }
    case "ToolCallDelta": {
      const choice = choiceOf(acc, chunk.index)
      const call = choice.toolCalls.get(chunk.toolIndex)
      if (call === undefined) {
        choice.toolCalls.set(chunk.toolIndex, {
          id: chunk.id ?? "",
          name: chunk.name ?? "",
          arguments: chunk.arguments
        })
      } else {
        // Some servers repeat the id and name on later fragments; the first non-empty value wins.
        if (call.id === "" && chunk.id !== undefined) call.id = chunk.id
        if (call.name === "" && chunk.name !== undefined) call.name = chunk.name
        call.arguments += chunk.arguments
      }
      break
    }
    case "Finish": {
      const choice = choiceOf(acc, chunk.index)
      choice.finishReason = chunk.finishReason
      if (chunk.stopReason !== undefined) choice.stopReason = chunk.stopReason
      if (chunk.reasoningItems !== undefined) choice.reasoningItems = chunk.reasoningItems
      break
    }
    case "Usage": {
      acc.usage = chunk.usage
      break
    }
  }
  return acc
}

export const toResponse = (acc: Accumulator): Model.Response => {
  const indices = [...acc.choices.keys()].sort((a, b) => a - b)
  const choices = indices.map((index): Model.Choice => {
    const parts = acc.choices.get(index)!
    const toolIndices = [...parts.toolCalls.keys()].sort((a, b) => a - b)
    const toolCalls = toolIndices.map((i) => {
      const call = parts.toolCalls.get(i)!
      return { id: call.id, name: call.name, arguments: call.arguments }
    })
    return {
      index,
      text: parts.text,
      toolCalls,
      ...(parts.reasoning !== undefined ? { reasoning: parts.reasoning } : {}),
      finishReason: parts.finishReason ?? (toolCalls.length > 0 ? "tool_calls" : "stop"),
      ...(parts.stopReason !== undefined ? { stopReason: parts.stopReason } : {}),
      ...(parts.logprobs !== undefined ? { logprobs: parts.logprobs } : {}),
      ...(parts.tokenIds !== undefined ? { tokenIds: parts.tokenIds } : {}),
      ...(parts.reasoningItems !== undefined ? { reasoningItems: parts.reasoningItems } : {})
    }
  })
  return {
    id: acc.id,
    model: acc.model,
    choices,
    usage: acc.usage ?? { inputTokens: 0, outputTokens: 0, totalTokens: 0 },
    ...(acc.promptTokenIds !== undefined ? { promptTokenIds: acc.promptTokenIds } : {}),
    ...(acc.promptLogprobs !== undefined ? { promptLogprobs: acc.promptLogprobs } : {})
  }
}

/** Splits text into words, each with the whitespace before it, so that joining the pieces gives the text back. */
export const wordPieces = (text: string): Array<string> => text.match(/\s*\S+|\s+$/g) ?? (text === "" ? [] : [text])

export const toChunks = (response: Model.Response): Array<Model.Chunk> => {
  const chunks: Array<Model.Chunk> = [{
    _tag: "Metadata",
    id: response.id,
    model: response.model,
    ...(response.promptTokenIds !== undefined ? { promptTokenIds: response.promptTokenIds } : {}),
    ...(response.promptLogprobs !== undefined ? { promptLogprobs: response.promptLogprobs } : {})
  }]
  for (const choice of response.choices) {
    if (choice.reasoning !== undefined) {
      for (const piece of wordPieces(choice.reasoning)) {
        chunks.push({ _tag: "ReasoningDelta", index: choice.index, text: piece })
      }
    }
    const pieces = wordPieces(choice.text)
    if (choice.logprobs !== undefined || choice.tokenIds !== undefined) {
      // Log-probabilities and ids belong to tokens, not to words: send them whole with the first piece.
      chunks.push({
        _tag: "TextDelta",
        index: choice.index,
        text: pieces[0] ?? "",
        ...(choice.logprobs !== undefined ? { logprobs: choice.logprobs } : {}),
        ...(choice.tokenIds !== undefined ? { tokenIds: choice.tokenIds } : {})
      })
      for (const piece of pieces.slice(1)) chunks.push({ _tag: "TextDelta", index: choice.index, text: piece })
    } else {
      for (const piece of pieces) chunks.push({ _tag: "TextDelta", index: choice.index, text: piece })
    }
    choice.toolCalls.forEach((call, toolIndex) => {
      const half = Math.ceil(call.arguments.length / 2)
      chunks.push({
        _tag: "ToolCallDelta",
        index: choice.index,
        toolIndex,
        id: call.id,
        name: call.name,
        arguments: call.arguments.slice(0, half)
      })
      chunks.push({ _tag: "ToolCallDelta", index: choice.index, toolIndex, arguments: call.arguments.slice(half) })
    })
    chunks.push({
      _tag: "Finish",
      index: choice.index,
      finishReason: choice.finishReason,
      ...(choice.stopReason !== undefined ? { stopReason: choice.stopReason } : {}),
      ...(choice.reasoningItems !== undefined ? { reasoningItems: choice.reasoningItems } : {})
    })
  }
  chunks.push({ _tag: "Usage", usage: response.usage })
  return chunks
}
