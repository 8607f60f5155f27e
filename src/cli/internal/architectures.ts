/**
 * The architectures `valet run` and `valet replay` can run on a prompt, by name. Each entry needs only a `Model`;
 * add a line here to offer another one (architectures that need more services, such as ToolVote's sandbox, need
 * their layers provided in `run.ts` too).
 */
import type * as Architecture from "../../core/Architecture.js"
import * as Agent from "../../core/Agent.js"
import * as Ensemble from "../../architectures/Ensemble.js"
import type * as Model from "../../core/Model.js"
import * as MultiAgentDebate from "../../architectures/MultiAgentDebate.js"
import * as PlanAndExecute from "../../architectures/PlanAndExecute.js"
import * as ReAct from "../../architectures/ReAct.js"
import * as Reflexion from "../../architectures/Reflexion.js"
import * as SelfRefine from "../../architectures/SelfRefine.js"
import * as TreeOfThoughts from "../../architectures/TreeOfThoughts.js"

/** A runnable architecture and one line about it for `--help`. */
export interface Entry {
  readonly description: string
  readonly architecture: Architecture.Architecture<Model.Model>
}

/** The table, by the name given to `--architecture`. */
export const architectures: Readonly<Record<string, Entry>> = {
  react: { description: "the ReAct tool loop (no tools from the command line: one answer)", architecture: ReAct.architecture },
  "self-refine": { description: "a base answer, then critique / refine rounds", architecture: SelfRefine.architecture },
  "plan-and-execute": { description: "a plan of steps, each executed, then a synthesis", architecture: PlanAndExecute.architecture },
  reflexion: { description: "attempts scored by an evaluator, with lessons between them", architecture: Reflexion.architecture },
  ensemble: { description: "solvers, a critic and a judge, voting on the final answer", architecture: Ensemble.architecture },
  "tree-of-thoughts": { description: "a beam search over chains of thoughts, proposed and scored level by level", architecture: TreeOfThoughts.architecture },
  debate: {
    description: "three debaters on the model answer, read each other, and answer again until they agree (else a vote)",
    architecture: MultiAgentDebate.makeUnsafe({
      debaters: [1, 2, 3].map((i) => Agent.make({ name: `debater-${i}`, instructions: "Answer the question; defend or revise your answer when you see others." }))
    })
  }
}

/** The names, `react` first. */
export const names: ReadonlyArray<string> = Object.keys(architectures)
