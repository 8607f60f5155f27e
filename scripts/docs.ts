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

const main = () => {
  if (process.argv[2] === "tables") {
    // Rewrites the README's option tables from the declarations.
    const readme = join(root, "README.md")
    writeFileSync(readme, withTables(readFileSync(readme, "utf8"), declarations()))
    return
  }
  const found = problems()
  for (const line of found) console.log(line)
  console.log(`${found.length} problems`)
  process.exitCode = found.length === 0 ? 0 : 1
}


// ---------------------------------------------------------------------------------------------------------
// The README's option tables, from the declarations
// ---------------------------------------------------------------------------------------------------------

/** One option of a declaration, as its source says it. */
export interface OptionRow {
  readonly name: string
  readonly default: string
  readonly doc: string
}

/** A declaration found in a source file: its name and options (`Architecture.define({ name, options })`). */
export interface Declared {
  readonly file: string
  readonly name: string
  readonly title: string
  readonly options: ReadonlyArray<OptionRow>
  readonly deprecated: ReadonlyArray<readonly [string, string]>
}

const stringOf = (node: ts.Expression | undefined): string | undefined =>
  node !== undefined && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) ? node.text : undefined

/** The sources whose `const` objects a declaration may name (its options kept beside it, or ReAct's in core). */
const objectSources = (): ReadonlyArray<ts.SourceFile> => [
  ...ts.sys.readDirectory(join(root, "src", "architectures"), [".ts"], undefined, undefined, 4),
  join(root, "src", "core", "internal", "toolLoop.ts")
].map(parse)

/** The string a name or `Module.name` refers to (`name: internal.name`), from a `const` of the sources. */
const constStringOf = (sources: ReadonlyArray<ts.SourceFile>, node: ts.Expression | undefined): string | undefined => {
  if (node === undefined || !(ts.isIdentifier(node) || ts.isPropertyAccessExpression(node))) return undefined
  const name = ts.isIdentifier(node) ? node.text : node.name.text
  for (const source of sources) {
    for (const statement of source.statements) {
      if (!ts.isVariableStatement(statement)) continue
      for (const declaration of statement.declarationList.declarations) {
        if (ts.isIdentifier(declaration.name) && declaration.name.text === name) {
          const value = stringOf(declaration.initializer)
          if (value !== undefined) return value
        }
      }
    }
  }
  return undefined
}

/** An object literal: written in place, or the `const` a name or `Module.name` refers to in the sources. */
const objectOf = (sources: ReadonlyArray<ts.SourceFile>, node: ts.Expression | undefined): ts.ObjectLiteralExpression | undefined => {
  if (node === undefined) return undefined
  if (ts.isObjectLiteralExpression(node)) return node
  if (ts.isAsExpression(node)) return objectOf(sources, node.expression)
  if (!ts.isIdentifier(node) && !ts.isPropertyAccessExpression(node)) return undefined
  const name = ts.isIdentifier(node) ? node.text : node.name.text
  let found: ts.ObjectLiteralExpression | undefined
  const visit = (child: ts.Node) => {
    if (found !== undefined) return
    if (ts.isVariableDeclaration(child) && ts.isIdentifier(child.name) && child.name.text === name && child.initializer !== undefined) {
      const init = ts.isAsExpression(child.initializer) ? child.initializer.expression : child.initializer
      if (ts.isObjectLiteralExpression(init)) found = init
    }
    ts.forEachChild(child, visit)
  }
  // The file of the node first: a name means its own file's const before another's.
  const own = node.getSourceFile()
  for (const source of [own, ...sources.filter((other) => other.fileName !== own.fileName)]) {
    visit(source)
    if (found !== undefined) return found
  }
  return undefined
}

const defaultOf = (text: string): string => {
  const match = /withDefault(?:<[^>]*>)?\(([\s\S]*)\)\)?\s*$/.exec(text)
  if (match === null) return "—"
  const value = match[1]!.replace(/\)\s*$/, "").trim()
  if (/^default[A-Z]\w*$/.test(value)) return "(built in)"
  return value.length > 40 ? "(built in)" : `\`${value.replace(/\s+/g, " ")}\``
}

/** Every `Architecture.define` of the architecture sources, with its options as written. */
export const declarations = (): ReadonlyArray<Declared> => {
  const sources = objectSources()
  const found: Array<Declared> = []
  for (const source of sources) {
    const file = source.fileName
    const visit = (node: ts.Node) => {
      if (
        ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && node.expression.name.text === "define" &&
        node.arguments.length === 1 && ts.isObjectLiteralExpression(node.arguments[0]!)
      ) {
        const spec = node.arguments[0]
        const property = (name: string) =>
          spec.properties.find((p): p is ts.PropertyAssignment => ts.isPropertyAssignment(p) && ts.isIdentifier(p.name) && p.name.text === name)?.initializer
        const name = stringOf(property("name")) ?? constStringOf(sources, property("name"))
        const options = objectOf(sources, property("options"))
        const fields = options === undefined ? [] : options.properties.flatMap((p): ReadonlyArray<ts.ObjectLiteralElementLike> =>
          ts.isSpreadAssignment(p) ? [...(objectOf(sources, p.expression)?.properties ?? [])] : [p]
        )
        const rows = fields.flatMap((field): ReadonlyArray<OptionRow> => {
          if (!(ts.isPropertyAssignment(field) || ts.isShorthandPropertyAssignment(field)) || !ts.isIdentifier(field.name)) return []
          const doc = ts.getJSDocCommentsAndTags(field).filter(ts.isJSDoc).map((d) => (typeof d.comment === "string" ? d.comment : ts.getTextOfJSDocComment(d.comment) ?? "")).join(" ")
          const text = ts.isPropertyAssignment(field) ? field.initializer.getText(field.getSourceFile()) : ""
          return [{ name: field.name.text, default: defaultOf(text), doc: doc.replace(/\s+/g, " ").trim() }]
        })
        const deprecated = objectOf(sources, property("deprecated"))?.properties.flatMap((p): ReadonlyArray<readonly [string, string]> => {
          if (!ts.isPropertyAssignment(p)) return []
          const key = ts.isIdentifier(p.name) || ts.isStringLiteral(p.name) ? p.name.text : p.name.getText(p.getSourceFile())
          const to = stringOf(p.initializer) ?? (ts.isObjectLiteralExpression(p.initializer)
            ? stringOf(p.initializer.properties.find((q): q is ts.PropertyAssignment => ts.isPropertyAssignment(q) && q.name.getText(q.getSourceFile()) === "to")?.initializer)
            : undefined)
          return to === undefined ? [] : [[key, to]]
        }) ?? []
        if (name !== undefined) {
          found.push({ file: relative(root, file), name, title: stringOf(property("title")) ?? name, options: rows, deprecated })
        }
      }
      ts.forEachChild(node, visit)
    }
    visit(source)
  }
  return found.sort((a, b) => a.name.localeCompare(b.name))
}

const cell = (text: string): string => text.replace(/\|/g, "\\|")

/** The markdown table of one declaration's options. */
export const optionsTable = (declared: Declared): string => {
  const rows = declared.options.map((row) => `| \`${row.name}\` | ${cell(row.default)} | ${cell(row.doc)} |`)
  const deprecated = declared.deprecated.length === 0
    ? ""
    : `\nDeprecated names, still read: ${declared.deprecated.map(([from, to]) => `\`${from}\` → \`${to}\``).join(", ")}.\n`
  return `| option | default | what it is |\n| --- | --- | --- |\n${rows.join("\n")}\n${deprecated}`
}

/** `text` with every `<!-- options:<name> -->` … `<!-- /options -->` block written from the declarations. */
export const withTables = (text: string, declared: ReadonlyArray<Declared>): string =>
  text.replace(/<!-- options:([a-z_]+) -->\n[\s\S]*?<!-- \/options -->/g, (whole, name: string) => {
    const found = declared.find((d) => d.name === name)
    return found === undefined ? whole : `<!-- options:${name} -->\n${optionsTable(found)}<!-- /options -->`
  })

if (import.meta.url === `file://${process.argv[1]}`) main()
