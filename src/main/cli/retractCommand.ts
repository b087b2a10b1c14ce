// `retract`: a report withdrawn by the operators.
import { postIdOf } from '../../partners/partnerReport.js';
import { parsePkey, SOURCE } from '../../store/layout.js';
import { common, partnerOption, print, required, UsageError, withRuntime, type Command } from './options.js';

export const retract: Command = {
  summary: "retract a report (any partner's): hidden at once, its personal fields purged from the parts by the next compaction",
  usage: 'retract (--pkey PKEY | --post-id N [--partner NAME]) --reason TEXT [--json]',
  options: { ...common, pkey: { type: 'string' }, 'post-id': { type: 'string' }, partner: { type: 'string' }, reason: { type: 'string' } },
  run: ({ config, values }) => {
    // Options are checked before anything opens: a mistake is a usage error (2), never a store's (69).
    const reason = required(values, 'reason');
    if (reason.length > 500) throw new UsageError('--reason must be at most 500 characters');
    let given: string | undefined;
    let postId: number;
    let partner: string | undefined;
    if (typeof values.pkey === 'string') {
      if (values['post-id'] !== undefined || values.partner !== undefined) throw new UsageError('give --pkey, or --post-id with --partner, not both');
      const parts = parsePkey(values.pkey);
      if (!parts) throw new UsageError('--pkey must be a report key such as partner-123 or partner-alpha-123');
      given = values.pkey;
      postId = parts.post_id;
    } else {
      if (typeof values['post-id'] !== 'string') throw new UsageError('give the report: --pkey KEY, or --post-id N (with --partner NAME for a partner\'s)');
      const named = postIdOf(required(values, 'post-id'));
      if (named === undefined) throw new UsageError(`--post-id must be an integer from 0 to ${Number.MAX_SAFE_INTEGER}`);
      postId = named;
      partner = partnerOption(values);
    }
    return withRuntime(config, async (rt) => {
      // A post_id is a partner's own; without --partner, the report of no partner (partner-N).
      const pkey = given ?? (await rt.ledger.get({ source: SOURCE, post_id: postId, ...(partner !== undefined && { partner }) }))?.pkey;
      const result = pkey === undefined ? ({ found: false } as const) : await rt.ledger.retract(pkey, 'ops', reason);
      if (!result.found) {
        // --json keeps its answer on stdout; said plainly, it is an error's message.
        if (values.json) print(values, { post_id: postId, found: false }, () => '');
        else process.stderr.write(`no such report was accepted: ${pkey ?? `post_id ${postId}${values.partner === undefined ? ' of no partner' : ` of ${String(values.partner)}`}`}\n`);
        return 1;
      }
      const answer = { post_id: postId, retracted: true, first: result.first, ...result.retraction };
      print(values, answer, () => (result.first ? `retracted ${pkey} at ${result.retraction.retracted_at}` : `${pkey} was already retracted at ${result.retraction.retracted_at} (by ${result.retraction.by}: ${result.retraction.reason})`));
      return 0;
    });
  },
};
