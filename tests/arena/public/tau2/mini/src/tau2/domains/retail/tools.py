"""Tools of the mini retail domain (test data written for Arena, in tau2-bench's layout)."""

# τ²'s modules spell types the typing way (List, Optional): so does this one, to test reading them.
# ruff: noqa: UP006, UP035, UP045

from typing import List, Optional

from tau2.domains.retail.data_model import CallbackSlot, Channel, Window
from tau2.environment.toolkit import ToolKitBase, ToolType, is_tool


class MiniRetailTools(ToolKitBase):
    """A handful of shop tools."""

    def _order(self, order_id: str):
        """Not a tool: no decorator.

        Args:
            order_id: The order.
        """
        return self.db.orders[order_id]

    @is_tool(ToolType.READ)
    def find_user_id_by_email(self, email: str) -> str:
        """Look a customer's user id up by email.

        Args:
            email: The customer's email, like 'someone@example.com'.

        Returns:
            The user id.
        """
        raise NotImplementedError

    @is_tool(ToolType.READ)
    def get_user_details(self, user_id: str):
        """Show a customer's profile, payment methods and orders.

        Args:
            user_id: The user id, like 'ada_park_1001'.
        """
        raise NotImplementedError

    @is_tool(ToolType.READ)
    def get_order_details(self, order_id: str):
        """Show an order: its items, status, fulfillments and payments.

        Args:
            order_id: The order id, like '#W1000001' (mind the '#').
        """
        raise NotImplementedError

    @is_tool(ToolType.READ)
    def get_product_details(self, product_id: str):
        """Show a product and its variants.

        Args:
            product_id: The product id, like '1000000001'. Not an item id.
        """
        raise NotImplementedError

    @is_tool(ToolType.WRITE)
    def cancel_pending_order(self, order_id: str, reason: str):
        """Cancel an order that is still pending,
        refunding what was paid. Ask the customer to confirm first.

        Args:
            order_id: The order id, like '#W1000001'.
            reason: Why: 'no longer needed' or
                'ordered by mistake'.

        Raises:
            ValueError: If the order is not pending.
        """
        raise NotImplementedError

    @is_tool(ToolType.WRITE)
    def modify_pending_order_address(
        self, order_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ):
        """Change where a pending order ships.

        Args:
            order_id: The order id.
            address1: Street line.
            address2: Second line, or ''.
            city: City.
            state: State, like 'ME'.
            country: Country, like 'USA'.
            zip: Zip code.
        """
        raise NotImplementedError

    @is_tool(ToolType.WRITE)
    def modify_user_address(
        self, user_id: str, address1: str, address2: str, city: str, state: str, country: str, zip: str
    ):
        """Change a customer's default address.

        Args:
            user_id: The user id.
            address1: Street line.
            address2: Second line, or ''.
            city: City.
            state: State.
            country: Country.
            zip: Zip code.
        """
        raise NotImplementedError

    @is_tool(ToolType.WRITE)
    def modify_pending_order_items(
        self, order_id: str, item_ids: List[str], new_item_ids: List[str], payment_method_id: str
    ):
        """Swap items of a pending order for other variants of the same products.

        Args:
            order_id: The order id.
            item_ids: The items to swap, each like '2000000001'.
            new_item_ids: What to swap them for, in the same positions.
            payment_method_id: Pays or receives the price difference.
        """
        raise NotImplementedError

    @is_tool(ToolType.GENERIC)
    def transfer_to_human_agents(self, summary: str) -> str:
        """Hand the conversation to a person.

        Args:
            summary: What the customer needs.
        """
        return "Transfer successful"

    @is_tool(ToolType.WRITE, mutates_state=False)
    def schedule_callback(
        self,
        user_id: str,
        slot: CallbackSlot,
        channel: Channel = "phone",
        notes: Optional[str] = None,
        urgent: bool = False,
        budget: float | None = None,
        tags: list[str] | None = None,
        extra=3,
        *,
        ref: "Window",
    ) -> str:
        """
        Book a call back (a tool only the schema test uses).

        Args:
            user_id: The user id.
            slot: When to call.
            channel: How to reach the customer.
            notes (str): Anything the caller should know.
            extra (int): An untyped parameter typed by its docstring.
        """
        return "booked"

    @is_tool()
    def ping(self):
        """Answer 'pong'."""
        return "pong"
