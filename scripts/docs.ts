/**
 * The documentation that comes from the code, checked and regenerated here (`npx tsx scripts/docs.ts [check |
 * tables]`, and by test/docs.test.ts in CI):
 *
 * - every export of every public module (the subpaths of package.json) has a JSDoc comment with `@since` and
 *   `@category`;
 * - every public module's comment holds one ```ts example, and the examples type-check against the sources as a user
 *   writes them (`import … from "valet"` / `"valet/<Module>"`), as Effect's own docgen checks its examples;
 * - the README's option tables of the architectures are written from their `Architecture.define` declarations
 *   (`<!-- options:<name> -->` … `<!-- /options -->`).
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import ts from "typescript"

const root = join(import.meta.dirname, "..")

/** A public module: its subpath (`valet/Agent`) and its source file. */
export interface PublicModule {
  readonly subpath: string
  readonly file: string
}

/** The public modules, from package.json's `exports` (the root entry excluded: it re-exports the others). */
export const publicModules = (): ReadonlyArray<PublicModule> => {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { exports: Record<string, { types?: string } | string> }
  return Object.entries(pkg.exports).flatMap(([key, value]) => {
    if (key === "." || typeof value === "string" || value.types === undefined) return []
    const file = join(root, value.types.replace(/^\.\/dist\//, "src/").replace(/\.d\.ts$/, ".ts"))
    return [{ subpath: `valet/${key.slice(2)}`, file }]
  })
}

const parse = (file: string): ts.SourceFile =>
  ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS)

const isExported = (node: ts.Node): boolean =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((modifier) => modifier.kind === ts.SyntaxKind.ExportKeyword)

/** An export whose documentation is missing something. */
export interface Undocumented {
  readonly file: string
  readonly name: string
  readonly line: number
  readonly missing: ReadonlyArray<string>
}

const docOf = (node: ts.Node): { readonly text: string; readonly tags: ReadonlySet<string> } => {
  const docs = ts.getJSDocCommentsAndTags(node).filter(ts.isJSDoc)
  const text = docs.map((doc) => (typeof doc.comment === "string" ? doc.comment : ts.getTextOfJSDocComment(doc.comment) ?? "")).join("\n")
  const tags = new Set(docs.flatMap((doc) => (doc.tags ?? []).map((tag) => tag.tagName.text)))
  return { text, tags }
}

/** The exports of `file` that lack a JSDoc line, `@since` or `@category`. */
export const undocumented = (file: string): ReadonlyArray<Undocumented> => {
  const source = parse(file)
  const found: Array<Undocumented> = []
  const seen = new Set<string>()
  const check = (name: string, node: ts.Node) => {
    if (seen.has(name)) return // an overload or a value and its type of the same name: documented once
    seen.add(name)
    const { tags, text } = docOf(node)
    const missing = [
      ...(text.trim() === "" ? ["a description"] : []),
      ...(tags.has("since") ? [] : ["@since"]),
      ...(tags.has("category") ? [] : ["@category"])
    ]
    if (missing.length > 0) {
      found.push({ file: relative(root, file), name, line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1, missing })
    }
  }
  for (const statement of source.statements) {
    if (!isExported(statement)) continue
    if (ts.isVariableStatement(statement)) {
      for (const declaration of statement.declarationList.declarations) {
        if (ts.isIdentifier(declaration.name)) check(declaration.name.text, statement)
        else for (const element of declaration.name.elements) if (ts.isBindingElement(element) && ts.isIdentifier(element.name)) check(element.name.text, statement)
      }
    } else if (
      ts.isFunctionDeclaration(statement) || ts.isClassDeclaration(statement) || ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) || ts.isEnumDeclaration(statement)
    ) {
      if (statement.name !== undefined) check(statement.name.text, statement)
    }
  }
  return found
}

/** The first ```ts block of the module comment (the file's first JSDoc), or `undefined`. */
export const moduleExample = (file: string): string | undefined => {
  const text = readFileSync(file, "utf8")
  const comment = /^(?:#![^\n]*\n)?\s*\/\*\*([\s\S]*?)\*\//.exec(text)
  if (comment === null) return undefined
  const body = comment[1]!.split("\n").map((line) => line.replace(/^\s*\* ?/, "")).join("\n")
  const block = /```ts\n([\s\S]*?)```/.exec(body)
  return block === null ? undefined : block[1]
}

/** The type errors of the modules' examples, each compiled as a user's file importing `valet`. */
export const exampleErrors = (modules: ReadonlyArray<PublicModule>): ReadonlyArray<string> => {
  const dir = join(root, "node_modules", ".cache", "valet-doc-examples")
  rmSync(dir, { recursive: true, force: true })
  mkdirSync(dir, { recursive: true })
  const files: Array<string> = []
  for (const module of modules) {
    const example = moduleExample(module.file)
    if (example === undefined) continue
    const file = join(dir, `${module.subpath.replace(/^valet\//, "")}.ts`)
    // A module of its own (the examples' names must not clash), run as a user's file would be.
    writeFileSync(file, `${example}\nexport {}\n`)
    files.push(file)
  }
  const paths: Record<string, Array<string>> = { valet: [join(root, "src", "index.ts")] }
  for (const module of modules) paths[module.subpath] = [module.file]
  const config = ts.readConfigFile(join(root, "tsconfig.json"), ts.sys.readFile).config as { compilerOptions: object }
  const options = ts.convertCompilerOptionsFromJson(config.compilerOptions, root).options
  const program = ts.createProgram(files, { ...options, noEmit: true, noUnusedLocals: false, baseUrl: root, paths })
  return ts.getPreEmitDiagnostics(program)
    .filter((diagnostic) => diagnostic.file !== undefined && files.includes(diagnostic.file.fileName))
    .map((diagnostic) => {
      const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start ?? 0)
      return `${relative(dir, diagnostic.file!.fileName)}:${line + 1}: ${ts.flattenDiagnosticMessageText(diagnostic.messageText, " ")}`
    })
}

/** Every problem of the documentation, one line each. */
export const problems = (): ReadonlyArray<string> => {
  const modules = publicModules()
  const lines: Array<string> = []
  for (const module of modules) {
    if (moduleExample(module.file) === undefined) lines.push(`${relative(root, module.file)}: the module comment has no \`\`\`ts example`)
    for (const missing of undocumented(module.file)) {
      lines.push(`${missing.file}:${missing.line}: ${missing.name} has no ${missing.missing.join(", ")}`)
    }
  }
  return [...lines, ...exampleErrors(modules).map((error) => `example ${error}`)]
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const found = problems()
  for (const line of found) console.log(line)
  console.log(`${found.length} problems`)
  process.exitCode = found.length === 0 ? 0 : 1
}

