import { Console, Effect } from "effect"
import { Argument, Command } from "effect/cli"
import * as Journal from "../../core/Journal.js"
import * as Model from "../../core/Model.js"

const oneLine = (text: string, max = 100): string => {
  const flat = text.replace(/\s+/g, " ").trim()
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`
}

/** One line per recorded call, then the totals. */
export const describeCassette = (entries: ReadonlyArray<Journal.Entry>): Array<string> => {
  let usage = Model.emptyUsage
  let failures = 0
  const lines = entries.map((entry) => {
    const key = `${entry.session}/${entry.step}/${entry.hash}#${entry.occurrence}`
    if (entry.error !== undefined) {
      failures++
      return `${key}  FAILED ${entry.error._tag}: ${oneLine(entry.error.message)}`
    }
    const response = entry.response!
    usage = Model.addUsage(usage, response.usage)
    const calls = Model.toolCalls(response).map((call) => `${call.name}(${oneLine(call.arguments, 40)})`).join(", ")
    return `${key}  ${response.usage.totalTokens} tokens  ${calls !== "" ? `→ ${calls}` : oneLine(Model.text(response))}`
  })
  lines.push(
    `${entries.length} calls, ${failures} failed, ${usage.inputTokens} input + ${usage.outputTokens} output tokens`
  )
  return lines
}

const show = Command.make(
  "show",
  { path: Argument.File("cassette", { mustExist: true }).pipe(Argument.withDescription("A JSONL cassette.")) },
  ({ path }) =>
    Effect.flatMap(Journal.read(path), (entries) => Console.log(describeCassette(entries).join("\n")))
).pipe(Command.withDescription("Lists the model calls recorded in a cassette, with their keys and answers."))

/** `valet journal …`: inspect record / replay cassettes. */
export const journal = Command.make("journal").pipe(
  Command.withDescription("Inspect the JSONL cassettes written by Journal.layerRecord."),
  Command.withSubcommands([show])
)
