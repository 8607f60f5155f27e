/**
 * Every architecture that runs on a model alone, one line each: the root entry (`import { SelfRefine } from "valet"`)
 * re-exports them, and `Catalog` (what `valet.yaml`, `valet run --architecture` and the README's tables read) lists
 * their declarations. Adding one is its own file and one line here. ToolVote, which needs a sandbox, is a subpath of
 * its own (`valet/ToolVote`), so an app that only runs agents does not load the sandbox. DeepAgent runs on a model
 * alone too: without a `Workspace` in context its files are in memory.
 *
 * @since 0.2.0
 */
export * as ActorCritic from "./ActorCritic.js"
export * as Blackboard from "./Blackboard.js"
export * as DeepAgent from "./DeepAgent.js"
export * as Ensemble from "./Ensemble.js"
export * as MultiAgentDebate from "./MultiAgentDebate.js"
export * as PlanAndExecute from "./PlanAndExecute.js"
export * as ReAct from "./ReAct.js"
export * as ReWOO from "./ReWOO.js"
export * as Reflexion from "./Reflexion.js"
export * as Router from "./Router.js"
export * as SelfRefine from "./SelfRefine.js"
export * as Supervisor from "./Supervisor.js"
export * as Swarm from "./Swarm.js"
export * as TreeOfThoughts from "./TreeOfThoughts.js"
