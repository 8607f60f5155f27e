/**
 * DeepAgent's skills, the Agent Skills convention (Claude Code, deepagents, Mastra): a directory of folders, each with
 * a `SKILL.md` whose YAML frontmatter gives the skill's `name` and `description`. Only those two reach the model up
 * front (in the system message); the body and the folder's other files are read when the model opens the skill with
 * `open_skill`, so a hundred skills cost a hundred lines of context, not a hundred documents.
 *
 * A folder whose `SKILL.md` is missing a frontmatter, or whose frontmatter is not YAML or lacks a field, is a
 * `SkillError` naming the file; the other skills still load. A skill's files are read through a workspace over its
 * folder, so the sandbox's path checks (absolute paths, `..`, symbolic links out) confine them to it.
 */
import * as fs from "node:fs/promises"
import { join as joinPath } from "node:path"
import { Effect, Schema } from "effect"
import { parse as parseYaml } from "yaml"
import * as Tool from "../../../core/Tool.js"
import * as Workspace from "../../../environment/Workspace.js"

/** The tool's name. */
export const toolName = "open_skill"

/** The file of a skill's folder that declares it. */
export const skillFile = "SKILL.md"

/** Files of a skill listed to the model at most. */
const maxListedFiles = 200

/**
 * A skill could not be loaded: `path` is the file (or directory) at fault, `message` says what is wrong with it.
 *
 * @since 0.2.0
 * @category errors
 */
export class SkillError extends Schema.TaggedError<SkillError>()("SkillError", {
  path: Schema.String,
  message: Schema.String
}) {}

/** What a `SKILL.md`'s frontmatter must hold. */
const Frontmatter = Schema.Struct({
  name: Schema.NonEmptyString,
  description: Schema.NonEmptyString
})

/** A skill found: its name and description from the frontmatter, its folder, and the body after the frontmatter. */
export interface Skill {
  readonly name: string
  readonly description: string
  readonly folder: string
  readonly body: string
}

/** The skills of a directory, and the folders that could not be loaded. */
export interface Loaded {
  readonly skills: ReadonlyArray<Skill>
  readonly errors: ReadonlyArray<SkillError>
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** The frontmatter (between the first two `---` lines) and the body of a `SKILL.md`. */
const split = (text: string): { readonly frontmatter: string; readonly body: string } | undefined => {
  const match = /^\uFEFF?---[ \t]*\r?\n([\s\S]*?)^---[ \t]*(?:\r?\n|$)/m.exec(text)
  if (match === null || match.index !== 0) return undefined
  return { frontmatter: match[1]!, body: text.slice(match[0].length) }
}

/** One `SKILL.md`, parsed and checked. */
export const parseSkill = (path: string, folder: string, text: string): Effect.Effect<Skill, SkillError> =>
  Effect.gen(function*() {
    const parts = split(text)
    if (parts === undefined) {
      return yield* new SkillError({ path, message: `${path}: no frontmatter: the file must start with a --- line, the name and description in YAML, and a --- line` })
    }
    const data = yield* Effect.try({
      try: () => parseYaml(parts.frontmatter) as unknown,
      catch: (error) => new SkillError({ path, message: `${path}: the frontmatter is not valid YAML: ${messageOf(error).split("\n")[0]}` })
    })
    const frontmatter = yield* Schema.decodeUnknownEffect(Frontmatter)(data).pipe(
      Effect.mapError((error) => new SkillError({ path, message: `${path}: the frontmatter needs a name and a description (non-empty strings): ${error.message}` }))
    )
    return { name: frontmatter.name.trim(), description: frontmatter.description.trim(), folder, body: parts.body.trim() }
  })

/**
 * The skills of `directory`: each folder of it with a `SKILL.md` (folders without one are not skills and are passed
 * over). A broken skill, a second skill of the same name or a directory that cannot be read is an error in `errors`,
 * logged as a warning; the rest load.
 */
export const load = (directory: string): Effect.Effect<Loaded> =>
  Effect.gen(function*() {
    const entries = yield* Effect.tryPromise({
      try: () => fs.readdir(directory, { withFileTypes: true }),
      catch: (error) => new SkillError({ path: directory, message: `${directory}: cannot read the skills directory: ${messageOf(error)}` })
    }).pipe(Effect.result)
    if (entries._tag === "Failure") {
      yield* Effect.logWarning(entries.failure.message)
      return { skills: [], errors: [entries.failure] }
    }
    const skills: Array<Skill> = []
    const errors: Array<SkillError> = []
    const folders = entries.success.filter((entry) => entry.isDirectory()).map((entry) => entry.name).sort()
    for (const name of folders) {
      const folder = joinPath(directory, name)
      const path = joinPath(folder, skillFile)
      const text = yield* Effect.promise(() => fs.readFile(path, "utf8").catch(() => undefined))
      if (text === undefined) continue
      const parsed = yield* Effect.result(parseSkill(path, folder, text))
      const error = parsed._tag === "Failure"
        ? parsed.failure
        : skills.some((skill) => skill.name === parsed.success.name)
        ? new SkillError({ path, message: `${path}: a skill named ${parsed.success.name} is already loaded from another folder` })
        : undefined
      if (error !== undefined) {
        yield* Effect.logWarning(`skill not loaded: ${error.message}`)
        errors.push(error)
      } else if (parsed._tag === "Success") {
        skills.push(parsed.success)
      }
    }
    return { skills, errors }
  })

/** The skills as the model reads them in its system message. */
export const render = (skills: ReadonlyArray<Skill>): string =>
  `## Skills (open one with ${toolName} before doing the work it describes)\n` +
  skills.map((skill) => `- ${skill.name}: ${skill.description}`).join("\n")

const OpenSkill = Schema.Struct({
  name: Schema.String,
  file: Schema.optional(Schema.String)
})

/**
 * The `open_skill` tool over loaded skills: the body of `SKILL.md` and the list of the skill's other files, or with
 * `file` the text of one of them (a path relative to the skill's folder, confined to it).
 */
export const openSkill = (skills: ReadonlyArray<Skill>): Tool.Tool =>
  Tool.make({
    name: toolName,
    description: "Opens a skill from the list in your instructions: gives its instructions and the list of its files. " +
      "With `file` (a path relative to the skill's folder, as listed), gives that file's text.",
    parameters: OpenSkill,
    handler: ({ file, name }) =>
      Effect.gen(function*() {
        const skill = skills.find((candidate) => candidate.name === name)
        if (skill === undefined) {
          return yield* Effect.fail(`no skill named ${JSON.stringify(name)}: the skills are ${skills.map((candidate) => candidate.name).join(", ")}`)
        }
        const folder = yield* Effect.mapError(Workspace.makeDirectory(skill.folder), (error) => error.message)
        if (file !== undefined) {
          return yield* Effect.mapError(folder.readText(file), (error) => `skill ${skill.name}: ${error.message}`)
        }
        const found = yield* Effect.mapError(folder.glob("**/*", { limit: maxListedFiles }), (error) => error.message)
        const others = found.paths.filter((path) => path !== skillFile)
        const listing = others.length === 0
          ? "This skill has no other files."
          : `Files of this skill (read one with ${toolName} and its path as \`file\`):\n${others.map((path) => `- ${path}`).join("\n")}` +
            (found.truncated ? `\n(more than ${maxListedFiles} files: only the first are listed)` : "")
        return `# Skill: ${skill.name}\n\n${skill.body}\n\n${listing}`
      })
  })
