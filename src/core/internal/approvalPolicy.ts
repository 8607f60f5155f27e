/**
 * An approval policy: which calls of an agent's tools wait for a person (DESIGN §15), by tool name — the `approvals:`
 * of an agent in `valet.yaml`, and DeepAgent's `approvals` option (its file tools and `execute`).
 *
 * ```yaml
 * approvals:
 *   delete_file: true                                   # every call
 *   refund: { when: { argument: amount, above: 100 } }  # calls whose `amount` is above 100
 *   shell: { when: [{ argument: command, matches: "^rm " }, { argument: sudo, equals: true }] }  # any of them
 * approvalTimeout: 10 minutes
 * ```
 *
 * The predicate language is deliberately small (no code in a config file): a condition names one argument (a
 * dotted path into the arguments object) and one test — `above` / `below` a number, `equals` a scalar, `matches` a
 * regular expression (checked when the file is read; a list of strings, such as `execute`'s `command`, is matched as
 * its items joined by spaces). A list holds when any of its conditions does. A tool may be judged on its arguments as
 * it acts on them (`View`: DeepAgent's file tools on the normalized path, `execute` on the program's name). `matches`
 * tests the text of the call, not what the call will do: `python3 -c "…"` does anything Python can, so a rule meant
 * as a gate on a program asks for every call of it (`true`) or lists what may run unasked with a negative lookahead
 * (`^(?!python3 -m pytest( |$))`), never a deny-list of commands. When in doubt it
 * asks: arguments that are not a JSON object, or a value of the wrong type for its test (a string for `above`), need
 * approval; an argument that is absent does not (the tool's own schema refuses a missing required one).
 */
import { type Duration, Effect, Schema } from "effect"
import * as Tool from "../Tool.js"
import { Pattern } from "./pattern.js"

const ArgumentPath = Schema.String.check(Schema.makeFilter((path: string) =>
  /^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/.test(path) || "must name an argument (a dotted path: order.total)"
))


const tests = ["above", "below", "equals", "matches"] as const

/** One condition: an argument and exactly one test of it. */
export const Condition = Schema.Struct({
  argument: ArgumentPath,
  above: Schema.optional(Schema.Number),
  below: Schema.optional(Schema.Number),
  equals: Schema.optional(Schema.Union([Schema.String, Schema.Number, Schema.Boolean, Schema.Null])),
  matches: Schema.optional(Pattern)
}).check(Schema.makeFilter((condition: Readonly<Record<string, unknown>>) => {
  const given = tests.filter((test) => condition[test] !== undefined)
  return given.length === 1 || `needs exactly one of ${tests.join(", ")}${given.length > 1 ? ` (it has ${given.join(", ")})` : ""}`
}))
export type Condition = typeof Condition.Type

/** A tool's rule: `true` (every call), or `{ when }` (calls where the condition, or any of the list, holds). */
export const Rule = Schema.Union([
  Schema.Literal(true),
  Schema.Struct({
    when: Schema.Union([Condition, Schema.Array(Condition).check(Schema.isMinLength(1, { expected: "at least one condition" }))])
  })
])
export type Rule = typeof Rule.Type

/** An agent's policy: rules by tool name. */
export const Policy = Schema.Record(Schema.String, Rule)
export type Policy = typeof Policy.Type

const valueAt = (value: unknown, path: string): { readonly found: boolean; readonly value?: unknown } => {
  let current = value
  for (const key of path.split(".")) {
    if (typeof current !== "object" || current === null || Array.isArray(current) || !Object.hasOwn(current, key)) {
      return { found: false }
    }
    current = (current as Record<string, unknown>)[key]
  }
  return { found: true, value: current }
}

/** Whether `condition` holds for these arguments (already parsed). */
const holds = (condition: Condition, args: unknown): boolean => {
  const at = valueAt(args, condition.argument)
  if (!at.found) return false
  const value = at.value
  if (condition.above !== undefined) return typeof value !== "number" || value > condition.above
  if (condition.below !== undefined) return typeof value !== "number" || value < condition.below
  if (condition.matches !== undefined) {
    // A command as a list of its words (`["rm", "-rf", "x"]`) is matched as the line it reads as.
    const text = typeof value === "string"
      ? value
      : Array.isArray(value) && value.every((item) => typeof item === "string")
      ? value.join(" ")
      : undefined
    return text === undefined || new RegExp(condition.matches).test(text)
  }
  return value === condition.equals
}

/**
 * Whether a call with `argumentsText` needs approval under `rule` (true when the text is not a JSON object: the
 * policy cannot tell, so a person does).
 */
export const needsApproval = (rule: Rule, argumentsText: string, view?: View): boolean => {
  if (rule === true) return true
  let parsed: unknown
  try {
    parsed = JSON.parse(argumentsText === "" ? "{}" : argumentsText)
  } catch {
    return true
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return true
  const args = view === undefined ? parsed : view(parsed as Readonly<Record<string, unknown>>)
  if (args === undefined) return true
  const conditions = Array.isArray(rule.when) ? rule.when : [rule.when as Condition]
  return conditions.some((condition) => holds(condition, args))
}

/**
 * The arguments as the tool acts on them (a path normalized, a program by its name), for the rules to be judged on
 * that and not on a spelling of it (`./deploy/x` is `deploy/x`); `undefined` when it cannot tell: the call asks.
 */
export type View = (args: Readonly<Record<string, unknown>>) => Readonly<Record<string, unknown>> | undefined

/** The tool with its calls waiting for approval as `rule` says (`Tool.withApproval`), judged on `view` of the arguments. */
export const apply = <R>(tool: Tool.Tool<R>, rule: Rule, timeout: Duration.Input | undefined, view?: View): Tool.Tool<R> =>
  Tool.withApproval(tool, {
    ...(rule === true ? {} : { needsApproval: (argumentsText: string) => Effect.sync(() => needsApproval(rule, argumentsText, view)) }),
    ...(timeout !== undefined ? { timeout } : {})
  })

/**
 * A policy over a fixed set of tools (an architecture's own): a name outside `names` is refused, naming it and them.
 */
export const PolicyOf = (names: ReadonlyArray<string>) =>
  Policy.check(Schema.makeFilter((policy: Policy) => {
    const unknown = Object.keys(policy).find((name) => !names.includes(name))
    return unknown === undefined || `names the tool ${JSON.stringify(unknown)}, which is not one of ${names.join(", ")}`
  }))
