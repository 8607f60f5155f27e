import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { Agent, Model, ScriptedModel } from "../../src/index.js"
import * as DeepAgent from "../../src/architectures/DeepAgent.js"
import * as Workspace from "../../src/environment/Workspace.js"

// A real skills directory on disk: two good skills, one with a broken frontmatter, one missing a field, a folder that
// is not a skill, a secret beside the skills and a link in a skill that points at it.
const root = mkdtempSync(join(tmpdir(), "valet-skills-"))
const skillsDir = join(root, "skills")
const write = (path: string, text: string) => {
  mkdirSync(join(skillsDir, path, ".."), { recursive: true })
  writeFileSync(join(skillsDir, path), text)
}
write("pdf/SKILL.md", "---\nname: pdf\ndescription: Fill in and merge PDF forms.\n---\n# PDF\nRun scripts/fill.py with the form and the values.\n")
write("pdf/scripts/fill.py", "print('filling')\n")
write("pdf/reference/fields.md", "Field names are case-sensitive.\n")
write("pytest/SKILL.md", "---\nname: pytest\ndescription: \"Write and run Python tests: one assert per behaviour.\"\n---\nUse `python3 -m pytest -q`.\n")
write("broken/SKILL.md", "---\nname: broken\ndescription: [unclosed\n---\nbody\n")
write("nodesc/SKILL.md", "---\nname: nodesc\n---\nbody\n")
write("notes/README.md", "not a skill\n")
writeFileSync(join(root, "secret.txt"), "the secret\n")
symlinkSync(join(root, "secret.txt"), join(skillsDir, "pdf", "leak.txt"))

afterAll(() => rmSync(root, { recursive: true, force: true }))

const systemText = (request: Model.Request): string => {
  const first = request.messages?.[0]
  return first?.role === "system" ? Model.textOf(first.content) : ""
}
const toolResults = (request: Model.Request) =>
  (request.messages ?? []).filter((message) => message.role === "tool").map((message) => Model.textOf(message.content))

// Made in each test, so that each fails on its own where DeepAgent has no `skills` option.
const agent = () => Agent.make({ name: "clerk", instructions: "You do paperwork.", architecture: DeepAgent.makeUnsafe({ maxTurns: 10, skills: skillsDir }) })

describe("DeepAgent skills", () => {
  it.effect("lists each skill's name and description to the model, not its body; a broken frontmatter is named while the others load", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent(), "Fill the form")
      const calls = yield* ScriptedModel.calls
      const system = systemText(calls[0]!)
      expect(system).toContain("You do paperwork.")
      expect(system).toContain("- pdf: Fill in and merge PDF forms.")
      expect(system).toContain("- pytest: Write and run Python tests: one assert per behaviour.")
      // Bodies wait until the skill is opened; the broken ones and a folder without SKILL.md are not listed.
      expect(system).not.toContain("Run scripts/fill.py")
      expect(system).not.toMatch(/- (broken|nodesc|notes):/)
      expect(calls[0]!.tools?.map((tool) => tool.name)).toContain("open_skill")
      const errors = result.metadata.skillErrors as ReadonlyArray<{ readonly path: string; readonly message: string }>
      expect(errors.map((error) => error.path)).toEqual([join(skillsDir, "broken", "SKILL.md"), join(skillsDir, "nodesc", "SKILL.md")])
      expect(errors[0]!.message).toMatch(/broken\/SKILL\.md: the frontmatter is not valid YAML/)
      expect(errors[1]!.message).toMatch(/nodesc\/SKILL\.md: the frontmatter needs a name and a description/)
      expect(errors[1]!.message).toContain("description")
    }).pipe(Effect.provide(Workspace.layerMemory()), Effect.provide(ScriptedModel.layer(["Done."]))))

  it.effect("open_skill gives the body and the skill's other files; with file, one of them", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent(), "Fill the form")
      expect(result.output).toBe("Filled.")
      const calls = yield* ScriptedModel.calls
      const [opened, script, reference] = toolResults(calls[2]!)
      expect(opened).toContain("# Skill: pdf")
      expect(opened).toContain("Run scripts/fill.py with the form and the values.")
      expect(opened).not.toContain("name: pdf")
      expect(opened).toContain("- scripts/fill.py")
      expect(opened).toContain("- reference/fields.md")
      expect(script).toBe("print('filling')\n")
      expect(reference).toBe("Field names are case-sensitive.\n")
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer([
        { toolCalls: [{ name: "open_skill", arguments: { name: "pdf" } }] },
        { toolCalls: [{ name: "open_skill", arguments: { name: "pdf", file: "scripts/fill.py" } }, { name: "open_skill", arguments: { name: "pdf", file: "reference/fields.md" } }] },
        "Filled."
      ]))
    ))

  it.effect("a path out of the skill's folder is refused (.., absolute, a symbolic link out), as is an unknown skill", () =>
    Effect.gen(function*() {
      const result = yield* Agent.run(agent(), "Leak it")
      expect(result.output).toBe("Refused.")
      const calls = yield* ScriptedModel.calls
      const results = toolResults(calls[1]!)
      expect(results).toHaveLength(5)
      for (const text of results) expect(text).not.toContain("the secret")
      expect(results[0]).toMatch(/\.\./)
      expect(results[1]).toMatch(/absolute/)
      expect(results[2]).toMatch(/symbolic link/)
      expect(results[3]).toMatch(/does not exist/)
      expect(results[4]).toContain("no skill named \"nodesc\": the skills are pdf, pytest")
    }).pipe(
      Effect.provide(Workspace.layerMemory()),
      Effect.provide(ScriptedModel.layer([
        {
          toolCalls: [
            { name: "open_skill", arguments: { name: "pdf", file: "../../secret.txt" } },
            { name: "open_skill", arguments: { name: "pdf", file: join(root, "secret.txt") } },
            { name: "open_skill", arguments: { name: "pdf", file: "leak.txt" } },
            { name: "open_skill", arguments: { name: "pdf", file: "missing.md" } },
            { name: "open_skill", arguments: { name: "nodesc" } }
          ]
        },
        "Refused."
      ]))
    ))
})
