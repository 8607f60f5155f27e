/**
 * Prompt templates of the reflective architectures: `{name}` placeholders filled in one pass (so a model's
 * output that happens to contain `{critique}` is never substituted again), and a schema that refuses a template
 * naming a placeholder its architecture does not know (a typo would otherwise reach the model verbatim).
 */
import { Schema } from "effect"

const placeholderPattern = /\{([a-z][a-z0-9_]*)\}/g

/**
 * The task's placeholder is `{task}` in every template; `{prompt}`, `{question}` and `{problem}` were its names in
 * some, and are still filled with the task (deprecated, said once by `Architecture.define`).
 */
export const deprecatedPlaceholders: Readonly<Record<string, string>> = { prompt: "task", question: "task", problem: "task" }

/** Fills the known `{name}` placeholders of a template; anything else (JSON braces, unknown names) stays. */
export const fill = (template: string, values: Readonly<Record<string, string>>): string =>
  template.replace(placeholderPattern, (whole, name: string) => {
    if (Object.hasOwn(values, name)) return values[name]!
    const current = deprecatedPlaceholders[name]
    return current !== undefined && Object.hasOwn(values, current) ? values[current]! : whole
  })

/** The placeholders a template uses, in order of first use. */
export const placeholders = (template: string): Array<string> => [
  ...new Set([...template.matchAll(placeholderPattern)].map((match) => match[1]!))
]

/** A template string that may only use `allowed` placeholders. */
export const Template = (allowed: ReadonlyArray<string>) =>
  Schema.String.check(
    Schema.makeFilter((template: string) => {
      const unknown = placeholders(template).filter((name) =>
        !allowed.includes(name) && !(Object.hasOwn(deprecatedPlaceholders, name) && allowed.includes(deprecatedPlaceholders[name]!)))
      return unknown.length === 0 ||
        `has unknown placeholder${unknown.length > 1 ? "s" : ""} ${unknown.map((name) => `{${name}}`).join(", ")}; ` +
          `this template may use ${allowed.map((name) => `{${name}}`).join(", ")}`
    })
  )

/** `- item` lines; `empty` when there are no items. */
export const bulleted = (items: ReadonlyArray<string>, empty = "- (none)"): string =>
  items.length === 0 ? empty : items.map((item) => `- ${item.replace(/\s*\n\s*/g, " ")}`).join("\n")
