"""--value-horizon H, an option of the variant scripts beyond the paper (issues 49, 56): V's target over the next
n = round(H / dt) steps of the same env, so the same physical horizon at every dt. A replay row holds one float more,
whether it continues the return of its env's previous row (`follows`); a batch's rows carry what their env's next
n - 1 rows give (`rows_ahead`), and `horizon_target` makes V's target of them: at n = 1, the paper's, to the bit.

A script's ReplayBuffer keeps its fields in the order (s, a, r, d, s', follows), an env's next row `env_rows` rows on
(each add writes one row per env, in the envs' order)."""

import torch

REWARD, TERMINATED, NEXT_OBS, FOLLOWS = 2, 3, 4, 5  # the replay fields these functions read


def horizon_steps(value_horizon, dt):
    """n: round(H / dt) steps, at least one; one (Alg. 1) where the option is off (None)."""
    return max(1, round(value_horizon / dt)) if value_horizon else 1


def follows(buffer, obs, continues=True):
    """Whether each env's row about to be added continues its previous row's return: the same episode (that row's s'
    is this s: no termination or truncation between) and `continues` (the discrete variant's: whether the noise left
    the greedy action; the continuous variant's: always, an uncorrected n-step return)."""
    if buffer.size < len(obs):  # the first rows follow none
        return torch.zeros(len(obs), dtype=torch.bool, device=obs.device)
    previous = torch.arange(buffer.position - len(obs), buffer.position, device=obs.device) % buffer.capacity
    return continues & (buffer.fields[NEXT_OBS][previous] == obs).all(-1)


def rows_ahead(buffer, index, steps):
    """Each sampled row's env's next steps - 1 rows, reached while written after it and each following the one before:
    their rewards (0 where not reached), how many are reached, the last reached row's d and s' (or the row's own)."""
    ahead = buffer.env_rows * torch.arange(1, steps, device=index.device)
    rows = (index[..., None] + ahead) % buffer.capacity
    written = ((buffer.position - 1 - index) % buffer.capacity)[..., None] >= ahead  # not past the newest row
    reached = torch.where(written, buffer.fields[FOLLOWS][rows, 0], 0).cumprod(-1)
    last = (index + buffer.env_rows * reached.sum(-1).long()) % buffer.capacity
    rewards = torch.where(reached > 0, buffer.fields[REWARD][rows, 0], 0)
    return rewards, reached.sum(-1), buffer.fields[TERMINATED][last, 0], buffer.fields[NEXT_OBS][last]


def horizon_target(reward, rewards_ahead, steps_ahead, terminated, next_obs, value, dt, gamma):
    """V's target over the m = 1 + steps_ahead steps reached, in physical time as Alg. 1's one-step target:
    sum_k gamma^(k dt) r_k dt + gamma^(m dt) (1 - d) V(s_m); at m = 1 the paper's one-step target to the bit."""
    discounts = gamma ** (dt * torch.arange(1, rewards_ahead.shape[-1] + 1, device=reward.device))
    returns = reward + (discounts * rewards_ahead).sum(-1)
    return returns * dt + (1 - terminated) * gamma**dt * gamma ** (dt * steps_ahead) * value(next_obs)
