/**
 * valet's stdio transport for effect's `McpServer.layerStdio`: a `Stdio` whose stdin carries only well-formed
 * JSON-RPC lines and whose stdout is the one place anything reaches the process's stdout.
 *
 * effect's stdio protocol reads stdin with an NDJSON parser that throws on a malformed line (the error is logged —
 * on stdout — and the rest of that read is lost), keeps up to 16 MiB of an unfinished line and then fails without
 * an answer, and passes a non-scalar id to the RPC server, which answers a defect. So valet reads the real stdin
 * here: `jsonRpcLines` cuts it into lines of at most `maxMessageBytes` and decides on each; the good ones are handed
 * to effect one line per read, the bad ones are answered here (-32700 / -32600), and both answers and effect's own
 * responses are written by one writer, a whole message per write, so they never interleave.
 *
 * When the client closes stdin (MCP's way of saying it is done) `closed` completes — the runs in flight should stop
 * then — and effect's server is told after the last line it was handed: it answers what it read, then ends its
 * output, and `drained` completes once those answers are written. effect's own protocol interrupts the fiber that
 * built it when its output ends; valet's stdout never lets it see that end, so the owner of the transport decides
 * when to stop (`McpAgents.serveStdio` returns, `McpAgents.layerStdio` interrupts its builder).
 */
import { type Cause, Deferred, Effect, Fiber, Queue, type Scope, Sink, Stdio, Stream } from "effect"
import * as Lines from "./jsonRpcLines.js"

/** The transport's settings. */
export interface Options {
  /** The longest line accepted, in bytes; a longer one is answered -32600 and skipped. */
  readonly maxMessageBytes: number
  /** Where notes go (a message dropped or refused): a line of text, without its newline. */
  readonly note: (text: string) => Effect.Effect<void>
}

/** The transport, living in the scope that made it. */
export interface Transport {
  /** The `Stdio` to give effect's `McpServer.layerStdio`. */
  readonly stdio: Stdio.Stdio
  /** Completes when the client has closed stdin, or stdin or stdout failed (the client is gone). */
  readonly closed: Effect.Effect<void>
  /** Completes after `closed`, once the server has answered what it read and the answers are written. */
  readonly drained: Effect.Effect<void>
}

/**
 * effect's stdio NDJSON parser refuses lines of 16 MiB and more (its default buffer); valet forwards at most one
 * line per read, so any limit up to that holds.
 */
export const maxLineBytes = 16 * 1024 * 1024 - 1

const encoder = new TextEncoder()

/** Reads the `Stdio` in context (the process's) for the life of the scope. */
export const make = (options: Options): Effect.Effect<Transport, never, Stdio.Stdio | Scope.Scope> =>
  Effect.gen(function*() {
    const real = yield* Stdio.Stdio
    const maxBytes = Math.min(options.maxMessageBytes, maxLineBytes)
    const closed = yield* Deferred.make<void>()
    const outputEnded = yield* Deferred.make<void>()
    // Bounded: a client that writes faster than the server reads waits on its pipe, not on valet's memory.
    const frames = yield* Queue.bounded<Uint8Array, Cause.Done>(16)
    const out = yield* Queue.bounded<string | Uint8Array, Cause.Done>(64)
    const close = Effect.andThen(Deferred.succeed(closed, void 0), Queue.end(frames))

    const writer = yield* Stream.fromQueue(out).pipe(
      Stream.run(real.stdout()),
      Effect.catchCause(() =>
        // Nobody reads any more: let the server's pending writes through (dropped) so that it can end.
        options.note("stdout failed: the client is gone").pipe(Effect.andThen(Queue.shutdown(out)), Effect.andThen(close))
      ),
      Effect.forkScoped
    )

    const split = Lines.lineSplitter(maxBytes)
    // Every refusal is noted on stderr too: the client's log rarely shows an error answer to a message it mangled.
    const act = (decision: Lines.Decision): Effect.Effect<void> => {
      switch (decision._tag) {
        case "Forward":
          return Queue.offer(frames, encoder.encode(`${decision.text}\n`))
        case "Answer":
          return Effect.andThen(options.note(`refused an MCP message (${decision.code}): ${decision.message}`), Queue.offer(out, `${decision.text}\n`))
        case "Drop":
          return decision.note === undefined ? Effect.void : options.note(decision.note)
      }
    }
    const decideAll = (pieces: ReadonlyArray<Lines.Piece>) =>
      Effect.forEach(pieces, (piece) => act(piece._tag === "Line" ? Lines.decide(piece.bytes) : Lines.tooLong(piece.maxBytes)), {
        discard: true
      })
    yield* real.stdin.pipe(
      Stream.runForEach((chunk) => decideAll(split.push(chunk))),
      Effect.andThen(Effect.suspend(() => decideAll(split.end()))),
      Effect.catchCause(() => options.note("stdin failed: the client is gone")),
      Effect.andThen(close),
      Effect.forkScoped
    )

    const stdio = Stdio.make({
      args: real.args,
      stdinIsTerminal: real.stdinIsTerminal,
      stdoutIsTerminal: real.stdoutIsTerminal,
      stderrIsTerminal: real.stderrIsTerminal,
      stdin: Stream.fromQueue(frames),
      // Once effect's output ends, its sink stays open: effect would interrupt the fiber that built it otherwise.
      stdout: () =>
        Sink.forEach((chunk: string | Uint8Array) => Queue.offer(out, chunk)).pipe(
          Sink.mapEffect(() => Effect.andThen(Deferred.succeed(outputEnded, void 0), Effect.never))
        ),
      stderr: real.stderr
    })
    const drained = Deferred.await(outputEnded).pipe(
      Effect.raceFirst(Fiber.await(writer)),
      Effect.andThen(Queue.end(out)),
      Effect.andThen(Fiber.await(writer)),
      Effect.asVoid
    )
    return { stdio, closed: Deferred.await(closed), drained }
  })
