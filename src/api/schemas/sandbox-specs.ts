import { z } from "@hono/zod-openapi";
import { IMAGE_NAMES, INSTANCE_TYPES } from "../../config/sandbox-specs";

export const SandboxSpecInfoSchema = z
  .object({
    id: z.string(),
    command: z.array(z.string()).nullable(),
    created_at: z.string(),
    initial_env: z.record(z.string(), z.string()),
    working_dir: z.string(),
    description: z.string(),
    image: z.enum(IMAGE_NAMES).openapi({ description: "The container image (a named image of the container application)." }),
    instance_type: z.enum(INSTANCE_TYPES).openapi({ description: "The Cloudflare Containers instance size." }),
  })
  .openapi("SandboxSpecInfo");
