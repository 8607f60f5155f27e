/**
 * Names that become part of session ids, MCP tool names and OpenAI model names: an agent's, a role's, a worker's, a
 * route's, a solver's. One rule for all of them, so a name that works in one place works in every other.
 */
import { Schema } from "effect"

const namePattern = /^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$/

/** The longest name. */
export const maxNameLength = 48

/** Why `name` cannot be a name, or `undefined` when it can. */
export const nameProblem = (name: string): string | undefined =>
  namePattern.test(name) && name.length <= maxNameLength
    ? undefined
    : `is not a usable name: letters and digits joined by single - or _, at most ${maxNameLength} characters, got ${JSON.stringify(name.length > 60 ? `${name.slice(0, 57)}...` : name)}`

/** Whether `text` is letters and digits joined by single `-` or `_` (a role or an index, of any length). */
export const isNameLike = (text: string): boolean => namePattern.test(text)

/**
 * A name, as a schema. Its issue states the rule only: an options message adds the value itself
 * (`solvers[0].name must be a usable name: …, got "a b"`), where `nameProblem`'s text would show it twice.
 */
export const Name = Schema.String.check(
  Schema.makeFilter((name: string) => nameProblem(name) === undefined, {
    expected: `a usable name: letters and digits joined by single - or _, at most ${maxNameLength} characters`
  })
)
