/**
 * Prompt templates of the reflective architectures: `{name}` placeholders filled in one pass (so a model's
 * output that happens to contain `{critique}` is never substituted again), and a schema that refuses a template
 * naming a placeholder its architecture does not know (a typo would otherwise reach the model verbatim).
 */
import { Schema } from "effect"

const placeholderPattern = /\{([a-z][a-z0-9_]*)\}/g

/** Fills the known `{name}` placeholders of a template; anything else (JSON braces, unknown names) stays. */
export const fill = (template: string, values: Readonly<Record<string, string>>): string =>
  template.replace(placeholderPattern, (whole, name: string) => Object.hasOwn(values, name) ? values[name]! : whole)

/** The placeholders a template uses, in order of first use. */
export const placeholders = (template: string): Array<string> => [
  ...new Set([...template.matchAll(placeholderPattern)].map((match) => match[1]!))
]

/** A template string that may only use `allowed` placeholders. */
export const Template = (allowed: ReadonlyArray<string>) =>
  Schema.String.check(
    Schema.makeFilter((template: string) => {
      const unknown = placeholders(template).filter((name) => !allowed.includes(name))
      return unknown.length === 0 ||
        `has unknown placeholder${unknown.length > 1 ? "s" : ""} ${unknown.map((name) => `{${name}}`).join(", ")}; ` +
          `this template may use ${allowed.map((name) => `{${name}}`).join(", ")}`
    })
  )

/** `- item` lines; `empty` when there are no items. */
export const bulleted = (items: ReadonlyArray<string>, empty = "- (none)"): string =>
  items.length === 0 ? empty : items.map((item) => `- ${item.replace(/\s*\n\s*/g, " ")}`).join("\n")
