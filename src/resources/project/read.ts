import type { ControllerContext } from "../../operator/controller.ts";
import { typedReader } from "../read.ts";
import { Project, ProjectType } from "./schema.ts";

// The Project as the other kinds read it (a Database's project reference).

const reader = typedReader(Project);

/** A Project object (from a cache or a watch event), parsed with its schema; undefined: none or invalid. */
export const readProject = reader.read;

/** The Project resources in the operator's cache, typed. */
export const projectsOf = (ctx: Pick<ControllerContext, "cache">) => reader.of(ctx.cache(ProjectType.kind));
